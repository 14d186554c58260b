#pragma once
// send_bw's command line: the options, the combinations refused before anything is opened
// (usage errors), the settings they make for lib/bench/bw_session, and the end of the report
// (the rows held against the CI gate). apps/send_bw registers the flags and runs.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lib/bench/bw_gate.hpp"
#include "lib/bench/bw_session.hpp"
#include "lib/core/cli.hpp"
#include "lib/core/progress.hpp"
#include "lib/core/report.hpp"

namespace rdmakit {

// The server flags (-P, --accept-timeout) come from ServerOptions.
struct BwOptions : ServerOptions {
  std::string server;  // empty: run as the server
  std::string bind;
  std::uint16_t port = 18515;
  std::string device;
  bw::Operation operation = bw::Operation::send;
  bw::Test test = bw::Test::bandwidth;
  bool latency_flag = false;
  std::uint32_t size = 65536;  // 0: the port's active MTU (-c UD without -s, as perftest)
  bool sweep = false;
  std::uint64_t iterations = 1000;
  double duration_s = 0;
  std::uint64_t warmup = 100;
  std::uint32_t depth = 128;
  std::uint32_t inline_size = 64;
  std::uint16_t queue_pairs = 1;
  bool bidirectional = false;
  std::string connection = "RC";  // -c: RC or UD
  std::optional<std::uint32_t> gid_index;
  std::uint32_t mtu = 0;
  std::uint32_t max_size = 64u << 20;  // server: largest buffer a client may ask for
  bool gbits = false;
  // Wider than the byte each is, so that the report's arguments show numbers, not characters.
  std::optional<unsigned> traffic_class;
  std::optional<unsigned> ack_timeout;
  unsigned retry_count = 7;
  bool counters = false;
  bool histogram = false;
  bool cpu_util = false;
  bool events = false;
  bool use_hugepages = false;
  std::optional<int> pin_core;
  AtomicKind atomic = AtomicKind::fetch_add;
  double interval_s = 0;
  bool run_forever = false;  // perftest's --run_infinitely: -D without end, each interval shown
  bool out_json = false;     // perftest's --out_json: the report to a file
  double rate_limit = 0;
  char rate_units = 'M';
  RowLimits limits;
  std::string baseline_file;
  double tolerance = 0.1;
  std::optional<Baseline> baseline;  // read from baseline_file before the run
};

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
