#pragma once
// perftest's spellings on send_bw's command line, so that an ib_send_bw command runs here:
// its flags that name a feature we have under another name (--report_gbits, --rate_limit
// in Gb/s, --out_json, --run_infinitely), the few that have no meaning here (-F, -R),
// and every other perftest flag refused with one line that says so. Hidden from --help;
// send_bw(1) has the table, perftest flag to ours. The plain aliases (-u, -T, --cpu_util
// ...) are names of our own options, in apps/send_bw.

#include <string>
#include <utility>
#include <vector>

#include "lib/base/cli_declarations.hpp"
#include "lib/send_bw/bw_options.hpp"

namespace rdmakit {

class PerftestFlags {
 public:
  PerftestFlags(CLI::App& app, BwOptions& o);

  // After parsing, before send_bw's own checks: the perftest spellings applied to `o`, or a
  // UsageError for a flag send_bw does not have. `duration_given` and `iterations_given`
  // say whether -D and -n were on the command line (and may change: --run_infinitely
  // makes a timed run). Returns what to tell the user of flags accepted as no-ops.
  std::vector<std::string> apply(BwOptions& o, bool& duration_given, bool iterations_given,
                                 bool rate_units_given) const;

 private:
  struct Refused {
    CLI::Option* option;
    std::string why;
  };
  std::vector<Refused> refused_;
  std::vector<std::pair<CLI::Option*, std::string>> ignored_;
  CLI::Option* rate_limit_ = nullptr;
  CLI::Option* out_json_ = nullptr;
  CLI::Option* run_infinitely_ = nullptr;
  CLI::Option* rate_limit_type_ = nullptr;
  double rate_limit_gbits_ = 0;
  std::string rate_limit_type_value_;
};

// -c: RC or UD in either case; perftest's other connection types refused, by name.
CLI::Validator connection_type();

// perftest's --run_infinitely: a timed run this long, printing each interval (-D's seconds).
inline constexpr double run_forever_s = 10.0 * 365 * 24 * 3600;
// perftest's interval for --run_infinitely without -D.
inline constexpr double perftest_default_interval_s = 5;
// Where perftest's --out_json writes without --out_json_file.
inline constexpr const char* perftest_json_file = "perftest_out.json";

}  // namespace rdmakit
