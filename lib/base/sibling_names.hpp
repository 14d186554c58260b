#pragma once
// How the suite's other programs are named where this one runs: the packager's prefix
// ("rdmakit-") before each tool's own name. A hint that tells the operator to run a sibling
// ("run 'diag-bind 10.0.0.9'") is composed with it where it is built, so that the command
// printed is the one installed on this host: rdmakit-diag-bind beside rdmakit-rping, plain
// diag-bind in a build folder. lib/tool/program_names.hpp finds the prefix.

#include <string>
#include <string_view>
#include <utility>

namespace rdmakit {

class SiblingNames {
 public:
  // The tools' own names, as a build folder has them.
  SiblingNames() = default;
  explicit SiblingNames(std::string prefix) : prefix_(std::move(prefix)) {}

  std::string operator()(std::string_view tool) const { return prefix_ + std::string(tool); }
  std::string diag_bind() const { return (*this)("diag-bind"); }
  std::string diag_connect() const { return (*this)("diag-connect"); }
  const std::string& prefix() const { return prefix_; }

 private:
  std::string prefix_;
};

}  // namespace rdmakit
