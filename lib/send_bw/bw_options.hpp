#pragma once
// send_bw's command line: the options, the combinations refused before anything is opened
// (usage errors), the settings they make for lib/send_bw/send_bw_session, and the end of the report
// (the rows held against the CI gate). apps/send_bw registers the flags and runs.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/base/cli_declarations.hpp"
#include "lib/base/report.hpp"
#include "lib/send_bw/bw_gate.hpp"
#include "lib/send_bw/send_bw_session.hpp"
#include "lib/tool/cli.hpp"
#include "lib/tool/progress.hpp"

namespace rdmakit {

// The flags of one measurement as send_bw declares them (its --help order): --op, --atomic,
// -s, -a, -n, -D, --warmup, -t and -I. rdma_mesh takes the subset it measures with (no
// atomics, no sweep) in its own words. Each tool says what the flags mean to it; the names,
// the checks and the defaults (BwSettings', and `MeasureFlags`') are written once.
struct MeasureWords {
  const char* operation = nullptr;
  const char* atomic = nullptr;  // --atomic; nullptr: --op offers no atomics either
  const char* size = nullptr;
  const char* sweep = nullptr;  // -a; nullptr: one size
  const char* iterations = nullptr;
  const char* duration = nullptr;
  const char* warmup = nullptr;
  const char* depth = nullptr;
  const char* inline_names = "-I,--inline";
  const char* inline_size = nullptr;
};

// What of the group is not a BwSettings field as typed: the size and sweep (its `sizes`,
// bw_sizes) and the duration in seconds (its budget), with whether each flag was given.
struct MeasureFlags {
  std::uint32_t size = 65536;  // 0: the port's active MTU (send_bw -c UD without -s, as perftest)
  bool sweep = false;
  double duration_s = 0;
  CLI::Option* size_option = nullptr;
  CLI::Option* atomic_option = nullptr;
  CLI::Option* iterations_option = nullptr;
  CLI::Option* duration_option = nullptr;

  static bool given(const CLI::Option* option);
  bool size_given() const { return given(size_option); }
  bool atomic_given() const { return given(atomic_option); }
  bool iterations_given() const { return given(iterations_option); }
  bool duration_given() const { return given(duration_option); }
  // -D's seconds as the budget's duration; none without -D.
  std::optional<std::chrono::nanoseconds> duration() const;
};

// Adds the group to `app`, bound to `settings` (operation, atomic, budget's iterations,
// warmup, depth, inline size) and to `flags`.
void add_measure_options(CLI::App& app, BwSettings& settings, MeasureFlags& flags, const MeasureWords& words);

// -n and -D both given: a UsageError (send_bw's and rdma_mesh's).
void check_count_or_duration(bool duration_given, bool iterations_given);

// send_bw's command line. Flags that are a setting as typed bind to `settings` (whose
// defaults are theirs); the rest are kept here as typed and make the settings in
// bw_settings(). The server flags (-P, --accept-timeout) come from ServerOptions.
struct BwOptions : ServerOptions {
  BwSettings settings;
  MeasureFlags measure;
  bool latency_flag = false;
  std::string connection = "RC";  // -c: RC or UD
  std::uint32_t mtu = 0;
  bool gbits = false;
  // Wider than the byte each is, so that the report's arguments show numbers, not characters.
  std::optional<unsigned> traffic_class;
  std::optional<unsigned> ack_timeout;
  unsigned retry_count = default_retry_count;
  double interval_s = 0;
  bool run_forever = false;  // perftest's --run_infinitely: -D without end, each interval shown
  bool out_json = false;     // perftest's --out_json: the report to a file
  double rate_limit = 0;
  RowLimits limits;
  std::string baseline_file;
  double tolerance = 0.1;
  std::optional<Baseline> baseline;  // read from baseline_file before the run
  ProgressOptions progress;
  CLI::Option* rate_units_option = nullptr;

  // Every send_bw flag but perftest's spellings (PerftestFlags) and the common ones.
  void add_to(CLI::App& app);
};

class PerftestFlags;

// After parsing, in this order: --lat and perftest's spellings applied (returns what to
// tell the user of flags accepted as no-ops); then the defaults that follow from the test
// and every check (UsageError).
std::vector<std::string> read_perftest_flags(BwOptions& o, const PerftestFlags& perftest);
void check_bw_options(BwOptions& o);

// send_bw's run: the client with a server address, else the server, into `report`.
void run_send_bw(const BwOptions& o, const CommonOptions& common, Report& report);

// The sizes a run measures: -s, or -a's 23 powers of two from 2 B to 8 MiB; none when the
// size is the port's MTU, which the session learns from the device.
std::vector<std::uint32_t> bw_sizes(const BwOptions& o);

// Flag combinations that cannot work (UsageError); reads --baseline's file. `*_given`:
// whether the flag was on the command line.
void validate_bw_options(BwOptions& o, bool duration_given, bool iterations_given);
// --op atomic: 8 bytes, one way, one size; --atomic only with it.
void validate_bw_atomics(const BwOptions& o, bool size_given, bool kind_given);

// The size when -s was not given: 2 for a latency test (perftest's default), 8 for atomics,
// the port's MTU for datagrams (0 here: the device is not known yet). Runs before the checks.
void apply_bw_defaults(BwOptions& o, bool size_given);

// --expect-bw, --expect-rate, --expect-lat-p99, --baseline and --tolerance.
void add_gate_options(CLI::App& app, BwOptions& o);

BwSettings bw_settings(const BwOptions& o, const CommonOptions& common, int stop_fd);

// Progress on stderr while the client runs (when `progress` is on): each row of the table
// as it completes, and each interval of --interval as it ends.
void show_bw_progress(BwSettings& s, Progress& progress, bool gbits);

// The results into the report, with how the text shows them; runs on success and on
// failure. After a run that completed, the rows held against the gate's limits and baseline.
void finish_bw_report(const BwOptions& o, BwResults& results, Report& report, bool completed);

}  // namespace rdmakit
