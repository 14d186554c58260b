#include "lib/send_bw/bw_options.hpp"

#include <algorithm>
#include <ostream>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/base/wait.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/send_bw/perftest_flags.hpp"
#include "lib/send_bw/perftest_oob.hpp"
#include "lib/send_bw/placement.hpp"
#include "lib/tool/cli_checks.hpp"

namespace rdmakit::bw {

// CLI11 reads an option's current value through operator<<: the report's arguments then
// say "lat" and "write", as typed, rather than nothing.
static std::ostream& operator<<(std::ostream& out, Test test) {
  return out << to_string(test);
}
static std::ostream& operator<<(std::ostream& out, Operation operation) {
  return out << to_string(operation);
}

}  // namespace rdmakit::bw

namespace rdmakit {

static std::ostream& operator<<(std::ostream& out, AtomicKind kind) {
  return out << to_string(kind);
}

namespace {

std::optional<std::chrono::nanoseconds> seconds(double s) {
  if (s <= 0) return std::nullopt;
  return std::chrono::nanoseconds(static_cast<long long>(s * 1e9));
}

// What only the client does: it measures the rows, and it opens the connection.
void validate_client_flags(const BwOptions& o) {
  if (!o.settings.server.empty()) return;
  const std::pair<bool, const char*> client_only[] = {
      {o.limits.any() || !o.baseline_file.empty(),
       "--expect-* and --baseline are the client's: it measures the rows they check"},
      {o.settings.histogram, "--histogram is the latency client's: its rows hold the samples"},
      {o.interval_s > 0, "--interval is the client's: it measures the run"},
      {o.rate_limit > 0, "--rate-limit is the client's: it paces what it sends"},
      {o.settings.counters, "--counters is the client's: it reads its port's counters around each row it measures"},
      {o.traffic_class.has_value(), "--tclass is the client's: the server answers in the class of the request"}};
  for (const auto& [given, why] : client_only) {
    if (given) throw UsageError(why);
  }
}

// The CI gate's flags: the client measures, so they are the client's; each limit fits one
// test; the baseline is read now, so that a bad file is a usage error before any run.
void validate_gate(BwOptions& o) {
  const bool latency = o.settings.test == bw::Test::latency;
  if (o.rate_limit > 0 && latency) {
    throw UsageError("--rate-limit paces a bandwidth test; a latency test has one message in flight");
  }
  for (const auto size : bw_sizes(o)) {
    if (o.rate_limit > 0 && messages_per_s(o.rate_limit, o.settings.rate_units, size) < 1) {
      throw UsageError(fmt::format("--rate-limit {}{} is below one {}-byte message a second", o.rate_limit,
                                   o.settings.rate_units, size));
    }
  }
  if (o.interval_s > 0 && (latency || o.measure.duration_s == 0)) {
    throw UsageError("--interval cuts a timed bandwidth run (-D) into intervals");
  }
  if (o.settings.histogram && !latency) {
    throw UsageError("--histogram applies to latency tests (--lat): their rows hold the samples");
  }
  if (latency && (o.limits.min_bw_mib_per_s || o.limits.min_rate_mpps)) {
    throw UsageError("--expect-bw and --expect-rate check bandwidth rows; a latency test has --expect-lat-p99");
  }
  if (!latency && o.limits.max_lat_p99_us) {
    throw UsageError("--expect-lat-p99 checks latency rows (--lat); a bandwidth test has --expect-bw");
  }
  if (!o.baseline_file.empty()) {
    o.baseline = read_baseline(o.baseline_file);
    check_baseline_matches(*o.baseline, o.settings.test, o.settings.operation);
  }
}

// -c UD: SEND in datagrams that each fit one packet, one way (latency: each answered).
void validate_datagrams(const BwOptions& o) {
  if (o.connection != "UD") return;
  constexpr std::uint32_t largest_mtu = 4096;
  const BwSettings& s = o.settings;
  const std::pair<bool, std::string> refused[] = {
      {s.operation != bw::Operation::send,
       "-c UD carries SEND only: RDMA WRITE, READ and atomics need a connection (-c RC)"},
      {s.bidirectional, "-b needs -c RC: a UD server does not send the datagrams back"},
      {o.mtu != 0, "-m sets a connection's path MTU; UD datagrams go at the port's active MTU"},
      {!s.server.empty() && !o.measure.sweep && o.measure.size > largest_mtu,
       fmt::format("-c UD: -s {} is above 4096, the largest MTU; a datagram is one packet", o.measure.size)}};
  for (const auto& [given, why] : refused) {
    if (given) throw UsageError(why);
  }
}

}  // namespace

std::optional<std::chrono::nanoseconds> MeasureFlags::duration() const {
  return seconds(duration_s);
}

void add_measure_options(CLI::App& app, BwSettings& settings, MeasureFlags& flags, const MeasureWords& words) {
  std::vector<std::pair<std::string, bw::Operation>> operations{
      {"send", bw::Operation::send}, {"write", bw::Operation::write}, {"read", bw::Operation::read}};
  if (words.atomic != nullptr) operations.emplace_back("atomic", bw::Operation::atomic);
  app.add_option("--op", settings.operation, words.operation)
      ->transform(one_of<bw::Operation>(operations))
      ->default_str(to_string(settings.operation));
  if (words.atomic != nullptr) {
    flags.atomic_option = app.add_option("--atomic", settings.atomic, words.atomic)
                              ->transform(one_of<AtomicKind>(
                                  {{"fetch-add", AtomicKind::fetch_add}, {"compare-swap", AtomicKind::compare_swap}}))
                              ->default_str(to_string(settings.atomic));
  }
  flags.size_option = app.add_option("-s,--size", flags.size, words.size)
                          ->capture_default_str()
                          ->check(CLI::Range(1U, bw::max_message_size));
  if (words.sweep != nullptr) app.add_flag("-a,--all", flags.sweep, words.sweep)->excludes(flags.size_option);
  flags.iterations_option = app.add_option("-n,--iters", settings.budget.iterations, words.iterations)
                                ->capture_default_str()
                                ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
  flags.duration_option = app.add_option("-D,--duration", flags.duration_s, words.duration)
                              ->check(FiniteNumber())
                              ->check(CLI::Range(0.001, 86400.0));
  app.add_option("--warmup", settings.warmup, words.warmup)->capture_default_str();
  app.add_option("-t,--tx-depth", settings.depth, words.depth)->capture_default_str()->check(CLI::Range(1, 65536));
  app.add_option(words.inline_names, settings.inline_size, words.inline_size)
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
}

bool MeasureFlags::given(const CLI::Option* option) {
  return option != nullptr && option->count() > 0;
}

void check_count_or_duration(bool duration_given, bool iterations_given) {
  if (duration_given && iterations_given) {
    throw UsageError("-n and -D do not combine: give a count or a duration");
  }
}

void BwOptions::add_to(CLI::App& app) {
  BwSettings& s = settings;
  app.add_option("server", s.server, "Server address (client mode); without it, run as the server");
  app.add_option("--bind,--source_ip", s.bind, "Local address (server: listen address)");
  app.add_option("-p,--port", s.port, "Port")->capture_default_str()->check(CLI::Range(1, 65535));
  app.add_option("-d,--ib-dev", s.device, "RDMA device the address must resolve to (checked)");
  app.add_option("--test", s.test, "bw (bandwidth) or lat (latency)")
      ->transform(one_of<bw::Test>({{"bw", bw::Test::bandwidth}, {"lat", bw::Test::latency}}))
      ->default_str(to_string(s.test));
  app.add_flag("--lat", latency_flag, "Same as --test lat");
  add_measure_options(app, s, measure,
                      {.operation = "send, write, read or atomic (8 bytes, --atomic)",
                       .atomic = "With --op atomic: fetch-add or compare-swap",
                       .size = "Message bytes (latency test: 2)",
                       .sweep = "Sweep sizes 2 B to 8 MiB (powers of two)",
                       .iterations = "Messages per size (per queue pair)",
                       .duration = "Run for this many seconds instead of -n",
                       .warmup = "Unmeasured messages before each size",
                       .depth = "Work requests in flight per queue pair (server: receives posted)",
                       .inline_names = "-I,--inline,--inline_size",
                       .inline_size = "Send messages up to this size inline (0: never)"});
  app.add_option("-q,--qp", s.queue_pairs, "Queue pairs (connections), streamed together")
      ->capture_default_str()
      ->check(CLI::Range(1, static_cast<int>(bw::max_queue_pairs)));
  app.add_option("-c,--connection", connection,
                 "RC, or UD: datagrams over rdma_cm's UDP port space (send bandwidth, sizes up to the MTU, "
                 "lost datagrams counted); both sides")
      ->capture_default_str()
      ->transform(connection_type());
  app.add_flag("-b,--bidirectional", s.bidirectional, "The server sends every message back (--op send)");
  app.add_flag("--oob", s.out_of_band,
               "Run with perftest (ib_send_bw, ib_write_bw, ib_read_bw; with --lat their _lat siblings; without "
               "-R) at the other end, the QPs' details exchanged over TCP as perftest does by default: the client "
               "of its server, or the server of one of its clients; -n and -s as the peer's where it counts them");
  app.add_option("-x,--gid-index", s.gid_index,
                 "Use the address of this GID table entry (default: rdma_cm's choice for the address)")
      ->check(CLI::Range(0, 65535));
  app.add_option("-i,--ib-port", s.ib_port, "The port of the device whose GID table -x reads")
      ->capture_default_str()
      ->check(CLI::Range(1, 255));
  app.add_option("-m,--mtu", mtu, "Path MTU: 256, 512, 1024, 2048 or 4096 (default: the route's)");
  app.add_option("-T,--tclass,--tos", traffic_class,
                 "Client: the traffic class (IP TOS byte on RoCE, rdma_cm's TOS option) to test through")
      ->check(CLI::Range(0, 255));
  app.add_option("-u,--ack-timeout,--qp-timeout", ack_timeout,
                 "Local ACK timeout, 4.096 us * 2^N (default: rdma_cm's from the path)")
      ->check(CLI::Range(0, 31));
  app.add_option("--retry-count,--retry_count", retry_count, "Transport retries before a send fails")
      ->capture_default_str()
      ->check(CLI::Range(0, 7));
  app.add_flag("--counters", s.counters,
               "Client: the port's hardware counters (sysfs) before and after each row, their change in the row");
  app.add_option("--rate-limit", rate_limit,
                 "Bandwidth client: pace the sender to this rate (--rate-units), to test a link below line rate")
      ->check(FiniteNumber())
      ->check(CLI::Range(1e-6, 1e9));
  rate_units_option =
      app.add_option("--rate-units,--rate_units", s.rate_units,
                     "--rate-limit's unit: M (MiB/s), g (Gb/s) or p (messages/s); perftest's --rate_limit: g")
          ->capture_default_str()
          ->check(CLI::IsMember({'M', 'g', 'p'}));
  app.add_option("--interval", interval_s,
                 "With -D: the bandwidth of each interval of this many seconds too (a time series)")
      ->check(FiniteNumber())
      ->check(CLI::Range(0.01, 3600.0));
  app.add_flag("--cpu-util,--cpu_util", s.cpu_util,
               "This side's user and system CPU time over each row (server: over the test), and per message");
  app.add_flag("-e,--events", s.events,
               "Sleep on the completion channel instead of busy polling (each side its own choice)");
  app.add_option("--pin-core", s.pin_core,
                 "Run on this core, with the buffers on the RDMA device's NUMA node (sysfs numa_node)")
      ->check(CLI::Range(0, CPU_SETSIZE - 1));
  app.add_flag("--use-hugepages,--use_hugepages", s.use_hugepages,
               "This side's buffers in huge pages (reserve them first: sysctl vm.nr_hugepages)");
  app.add_flag("--disable-pcie-relaxed,--disable_pcie_relaxed", s.disable_pcie_relaxed,
               "This side's buffers without PCIe relaxed ordering (registered with it by default, as perftest does)");
  app.add_flag("--histogram", s.histogram,
               "Latency client: each row's samples as a histogram in the JSON (scripts/bench-plot.sh draws it)");
  app.add_option("--max-size", s.max_size, "Server: largest message a client may ask for")
      ->capture_default_str()
      ->check(CLI::Range(1U, bw::max_message_size));
  app.add_option("--max-memory", s.max_memory,
                 "Server: most buffer memory one client may make it register, e.g. 256M (default: what "
                 "RLIMIT_MEMLOCK lets it pin, 1G where that is unbounded)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
  ServerOptions::add_to(app, "Server: serve clients one after another until stopped",
                        "Server: seconds to wait for a client, with -P for each next one (0 = forever)");
  app.add_flag("--report-gbits,--report_gbits", gbits, "Text table in Gb/s instead of MB/s");
  add_gate_options(app, *this);
  progress.add_to(app);
}

std::vector<std::string> read_perftest_flags(BwOptions& o, const PerftestFlags& perftest) {
  if (o.latency_flag) o.settings.test = bw::Test::latency;
  bool duration_given = o.measure.duration_given();
  return perftest.apply(o, duration_given, o.measure.iterations_given(), MeasureFlags::given(o.rate_units_option));
}

void check_bw_options(BwOptions& o) {
  validate_bw_atomics(o, o.measure.size_given(), o.measure.atomic_given());
  apply_bw_defaults(o, o.measure.size_given());
  // A timed run: -D, or perftest's --run_infinitely (read_perftest_flags).
  validate_bw_options(o, o.measure.duration_s > 0, o.measure.iterations_given());
  if (o.settings.out_of_band) check_perftest_mode(o.settings, o.measure.sweep, o.measure.duration_s > 0);
  // A name that resolves to nothing is a usage error even where no RDMA device is there to run on.
  check_resolvable(o.settings.server);
  check_resolvable(o.settings.bind);
}

void run_send_bw(const BwOptions& o, const CommonOptions& common, Report& report) {
  report.role = o.settings.server.empty() ? "server" : "client";
  const StopSignal stop;
  auto progress = Progress::for_stderr(o.progress, o.run_forever);
  auto settings = bw_settings(o, common, stop.fd());
  show_bw_progress(settings, progress, o.gbits);
  BwResults results;
  results.gbits = o.gbits;
  if (!settings.server.empty() && !settings.budget.duration) {
    // With -b a row counts both directions; a datagram run's one size is the MTU.
    report.iterations_requested = settings.budget.iterations * std::max<std::size_t>(settings.sizes.size(), 1) *
                                  settings.queue_pairs * (settings.bidirectional ? 2 : 1);
  }
  try {
    if (settings.out_of_band) {
      (settings.server.empty() ? run_perftest_server : run_perftest_client)(settings, report, results);
    } else if (settings.server.empty()) {
      run_bw_server(settings, report, results);
    } else {
      run_bw_client(settings, report, results);
    }
  } catch (...) {
    finish_bw_report(o, results, report, false);
    throw;
  }
  finish_bw_report(o, results, report, true);
}

std::vector<std::uint32_t> bw_sizes(const BwOptions& o) {
  if (!o.measure.sweep && o.measure.size == 0) return {};
  if (!o.measure.sweep) return {o.measure.size};
  std::vector<std::uint32_t> sizes;
  for (std::uint32_t size = 2; size <= (8U << 20); size *= 2) sizes.push_back(size);
  return sizes;
}

// Flag combinations that cannot work, refused before anything is opened.
void validate_bw_options(BwOptions& o, bool duration_given, bool iterations_given) {
  const BwSettings& s = o.settings;
  const bool latency = s.test == bw::Test::latency;
  if (o.mtu != 0) mtu_from_bytes(o.mtu);
  if (duration_given && o.measure.sweep) {
    throw UsageError("-a and -D do not combine: a sweep runs -n iterations per size");
  }
  check_count_or_duration(duration_given, iterations_given);
  if (latency && s.queue_pairs > 1) {
    throw UsageError("-q applies to bandwidth tests; a latency test runs on one queue pair");
  }
  if (latency && s.events && s.operation == bw::Operation::write) {
    throw UsageError(
        "-e does not apply to the write latency test: each side watches its buffer for the peer's write, no "
        "completion announces it");
  }
  if (latency && s.bidirectional) {
    throw UsageError("-b applies to bandwidth tests; a latency test is a round trip already");
  }
  if (s.bidirectional && s.operation != bw::Operation::send) {
    throw UsageError("-b works with --op send: the server sends back each message it receives");
  }
  if (o.persistent && !s.server.empty()) {
    throw UsageError("-P (persistent) is a server option");
  }
  if (s.gid_index && !s.bind.empty()) {
    throw UsageError("-x and --bind both choose the local address: give one");
  }
  if (s.pin_core) check_core_allowed(*s.pin_core);
  validate_datagrams(o);
  validate_client_flags(o);
  validate_gate(o);
}

// Atomics are 8 bytes, one way, at one size.
void validate_bw_atomics(const BwOptions& o, bool size_given, bool kind_given) {
  if (o.settings.operation != bw::Operation::atomic) {
    if (kind_given) throw UsageError("--atomic chooses the atomic of --op atomic");
    return;
  }
  if (size_given && o.measure.size != bw::atomic_size) {
    throw UsageError(
        fmt::format("--op atomic works on {} bytes; -s {} does not apply", bw::atomic_size, o.measure.size));
  }
  if (o.measure.sweep) throw UsageError("--op atomic works on 8 bytes: -a has no sizes to sweep");
}

// The results into the report, with how the text shows them; runs on success and on failure.
// After a run that completed, the rows held against the gate's limits and baseline.
void finish_bw_report(const BwOptions& o, BwResults& results, Report& report, bool completed) {
  results.persistent = o.persistent;
  results.gbits = o.gbits;
  std::optional<GateResult> gate;
  if (completed && (o.limits.any() || o.baseline)) gate = check_rows(results, o.limits, o.baseline, o.tolerance);
  report_results(std::move(results), report);
  if (!gate) return;
  const auto failed = !gate->passed();
  const auto summary = gate->summary();
  report.add(std::move(*gate));
  if (failed) {
    report.fail({.message = "below the gate: " + summary, .call = "", .errnum = 0, .hint = "", .completion = {}});
  }
}

void apply_bw_defaults(BwOptions& o, bool size_given) {
  if (o.settings.operation == bw::Operation::atomic) {
    o.measure.size = bw::atomic_size;
  } else if (!size_given && o.settings.test == bw::Test::latency) {
    o.measure.size = 2;
  } else if (!size_given && o.connection == "UD") {
    o.measure.size = 0;
  }
}

void add_gate_options(CLI::App& app, BwOptions& o) {
  // Text that is no number is left to FiniteNumber to refuse.
  const CLI::Validator above_zero(
      [](std::string& text) {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        return end != text.c_str() && value <= 0 ? std::string("must be above 0") : std::string();
      },
      "", "above zero");
  const auto add_limit = [&](const char* name, std::optional<double>& limit, const char* help) {
    app.add_option(name, limit, help)->check(FiniteNumber())->check(above_zero);
  };
  add_limit("--expect-bw", o.limits.min_bw_mib_per_s,
            "Exit 1 when a bandwidth row's average falls below this many MiB/s (CI gate)");
  add_limit("--expect-rate", o.limits.min_rate_mpps,
            "Exit 1 when a bandwidth row's message rate falls below this many Mpps");
  add_limit("--expect-lat-p99", o.limits.max_lat_p99_us,
            "Exit 1 when a latency row's 99th percentile rises above this many microseconds");
  auto* baseline = app.add_option("--baseline", o.baseline_file,
                                  "An earlier run's JSON report (send_bw --json): exit 1 when a row of the same size "
                                  "regressed beyond --tolerance")
                       ->type_name("FILE");
  app.add_option("--tolerance", o.tolerance,
                 "With --baseline: the fraction bandwidth may fall and latency rise (0.1 = 10%)")
      ->capture_default_str()
      ->check(FiniteNumber())
      ->check(CLI::Range(0.0, 10.0))
      ->needs(baseline);
}

BwSettings bw_settings(const BwOptions& o, const CommonOptions& common, int stop_fd) {
  BwSettings s = o.settings;
  s.sizes = bw_sizes(o);
  s.budget.duration = o.measure.duration();
  s.datagram = o.connection == "UD";
  if (o.mtu != 0) s.mtu = mtu_from_bytes(o.mtu);
  if (o.traffic_class) s.traffic_class = static_cast<std::uint8_t>(*o.traffic_class);
  if (o.ack_timeout) s.ack_timeout = static_cast<std::uint8_t>(*o.ack_timeout);
  s.retry_count = static_cast<std::uint8_t>(o.retry_count);
  s.interval = seconds(o.interval_s);
  if (o.rate_limit > 0) s.rate_limit = o.rate_limit;
  s.accept_timeout = o.accept_timeout();
  s.persistent = o.persistent;
  s.peers = o.gate_limits(s.bind);
  s.limits = {.stop_fd = stop_fd, .timeout = common.timeout()};
  return s;
}

void show_bw_progress(BwSettings& s, Progress& progress, bool gbits) {
  if (!progress.enabled()) return;
  s.row_done = [&progress](const BwResults& results) { progress.lines(newest_row_text(results)); };
  s.interval_done = [&progress, gbits, first = true](const IntervalSample& sample, std::uint32_t size) mutable {
    progress.lines(interval_progress_text(sample, size, gbits, first));
    first = false;
  };
}

}  // namespace rdmakit
