#pragma once
// Our validators and the enum transformer for CLI11 options, for the sources that declare
// options (lib/base/cli_declarations.hpp says why the headers do not include CLI11).

#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace rdmakit {

// For every floating-point option, checked before any CLI::Range: refuses "nan", "inf" and
// numbers beyond a double's range. CLI::Range lets NaN through (no comparison with NaN is
// true), and a NaN or infinite number of seconds turned into a duration is undefined
// behaviour. Text that is no number at all passes, for the conversion or the Range to report.
class FiniteNumber : public CLI::Validator {
 public:
  FiniteNumber();
};

// A file the tool will write at the end of its run (--json-file, --junit): refused as a usage
// error before the run when it could not be written then (a directory, no such folder, no
// permission), so that an hour's measurement is not lost to a typo.
class WritableFile : public CLI::Validator {
 public:
  WritableFile();
};

// A transformer from a fixed set of names to values (an enum), as CLI11 checks it (the usage
// error is CLI11's), described by the names alone ("{send,write,read}") for help and shell
// completion. The report's arguments read the option's value through operator<<, which must
// write the name.
template <typename Value>
CLI::Validator one_of(const std::vector<std::pair<std::string, Value>>& names) {
  static_assert(CLI::detail::is_ostreamable<Value>::value, "one_of needs an operator<< that writes the name");
  std::string described;
  for (const auto& [name, value] : names) {
    described += (described.empty() ? "{" : ",") + name;
  }
  return CLI::CheckedTransformer(names).description(described + "}");
}

}  // namespace rdmakit
