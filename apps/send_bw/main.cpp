// send_bw: a perftest-class bandwidth and latency tool over the documented rdma_cm flow.
// The client's rdma_connect carries a versioned hello (test, operation, largest message,
// depth, queue pairs) and the server's rdma_accept answers with its buffer; then the client
// measures SEND, RDMA WRITE or RDMA READ at one size (-s) or a sweep (-a). The flows live in
// lib/bw_session, the loops in lib/bench; this file is options and presentation.

#include <ostream>

#include <fmt/format.h>

#include "lib/bench/bw_gate.hpp"
#include "lib/bench/bw_session.hpp"
#include "lib/core/cli.hpp"
#include "lib/core/placement.hpp"
#include "lib/core/wait.hpp"
#include "lib/probe/host_probe.hpp"
#include "lib/rdma/cm.hpp"

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
}  // namespace rdmakit

namespace {

namespace bw = rdmakit::bw;

// The server flags (-P, --accept-timeout) come from ServerOptions.
struct Options : rdmakit::ServerOptions {
  std::string server;  // empty: run as the server
  std::string bind;
  std::uint16_t port = 18515;
  std::string device;
  bw::Operation operation = bw::Operation::send;
  bw::Test test = bw::Test::bandwidth;
  bool latency_flag = false;
  std::uint32_t size = 65536;
  bool sweep = false;
  std::uint64_t iterations = 1000;
  double duration_s = 0;
  std::uint64_t warmup = 100;
  std::uint32_t depth = 128;
  std::uint32_t inline_size = 64;
  std::uint16_t queue_pairs = 1;
  bool bidirectional = false;
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
  rdmakit::AtomicKind atomic = rdmakit::AtomicKind::fetch_add;
  double interval_s = 0;
  double rate_limit = 0;
  char rate_units = 'M';
  rdmakit::RowLimits limits;
  std::string baseline_file;
  double tolerance = 0.1;
  std::optional<rdmakit::Baseline> baseline;  // read from baseline_file before the run
};

std::vector<std::uint32_t> sizes_of(const Options& o) {
  if (!o.sweep) return {o.size};
  std::vector<std::uint32_t> sizes;
  for (std::uint32_t size = 2; size <= (8u << 20); size *= 2) sizes.push_back(size);
  return sizes;
}

// What only the client does: it measures the rows, and it opens the connection.
void validate_client_flags(const Options& o) {
  if (!o.server.empty()) return;
  const std::pair<bool, const char*> client_only[] = {
      {o.limits.any() || !o.baseline_file.empty(),
       "--expect-* and --baseline are the client's: it measures the rows they check"},
      {o.histogram, "--histogram is the latency client's: its rows hold the samples"},
      {o.interval_s > 0, "--interval is the client's: it measures the run"},
      {o.rate_limit > 0, "--rate-limit is the client's: it paces what it sends"},
      {o.counters, "--counters is the client's: it reads its port's counters around each row it measures"},
      {o.traffic_class.has_value(), "--tclass is the client's: the server answers in the class of the request"}};
  for (const auto& [given, why] : client_only) {
    if (given) throw rdmakit::UsageError(why);
  }
}

// The CI gate's flags: the client measures, so they are the client's; each limit fits one
// test; the baseline is read now, so that a bad file is a usage error before any run.
void validate_gate(Options& o) {
  const bool latency = o.test == bw::Test::latency;
  if (o.rate_limit > 0 && latency) {
    throw rdmakit::UsageError("--rate-limit paces a bandwidth test; a latency test has one message in flight");
  }
  for (const auto size : sizes_of(o)) {
    if (o.rate_limit > 0 && rdmakit::messages_per_s(o.rate_limit, o.rate_units, size) < 1) {
      throw rdmakit::UsageError(
          fmt::format("--rate-limit {}{} is below one {}-byte message a second", o.rate_limit, o.rate_units, size));
    }
  }
  if (o.interval_s > 0 && (latency || o.duration_s == 0)) {
    throw rdmakit::UsageError("--interval cuts a timed bandwidth run (-D) into intervals");
  }
  if (o.histogram && !latency) {
    throw rdmakit::UsageError("--histogram applies to latency tests (--lat): their rows hold the samples");
  }
  if (latency && (o.limits.min_bw_mib_per_s || o.limits.min_rate_mpps)) {
    throw rdmakit::UsageError(
        "--expect-bw and --expect-rate check bandwidth rows; a latency test has --expect-lat-p99");
  }
  if (!latency && o.limits.max_lat_p99_us) {
    throw rdmakit::UsageError("--expect-lat-p99 checks latency rows (--lat); a bandwidth test has --expect-bw");
  }
  if (!o.baseline_file.empty()) {
    o.baseline = rdmakit::read_baseline(o.baseline_file);
    rdmakit::check_baseline_matches(*o.baseline, o.test, o.operation);
  }
}

// Flag combinations that cannot work, refused before anything is opened.
void validate(Options& o, bool duration_given, bool iterations_given) {
  const bool latency = o.test == bw::Test::latency;
  if (o.mtu != 0) rdmakit::mtu_from_bytes(o.mtu);
  if (duration_given && o.sweep) {
    throw rdmakit::UsageError("-a and -D do not combine: a sweep runs -n iterations per size");
  }
  if (duration_given && iterations_given) {
    throw rdmakit::UsageError("-n and -D do not combine: give a count or a duration");
  }
  if (latency && o.queue_pairs > 1) {
    throw rdmakit::UsageError("-q applies to bandwidth tests; a latency test runs on one queue pair");
  }
  if (latency && o.events && o.operation == bw::Operation::write) {
    throw rdmakit::UsageError(
        "-e does not apply to the write latency test: each side watches its buffer for the peer's write, no "
        "completion announces it");
  }
  if (latency && o.bidirectional) {
    throw rdmakit::UsageError("-b applies to bandwidth tests; a latency test is a round trip already");
  }
  if (o.bidirectional && o.operation != bw::Operation::send) {
    throw rdmakit::UsageError("-b works with --op send: the server sends back each message it receives");
  }
  if (o.persistent && !o.server.empty()) {
    throw rdmakit::UsageError("-P (persistent) is a server option");
  }
  if (o.gid_index && !o.bind.empty()) {
    throw rdmakit::UsageError("-x and --bind both choose the local address: give one");
  }
  if (o.pin_core) rdmakit::check_core_allowed(*o.pin_core);
  validate_client_flags(o);
  validate_gate(o);
  // A name that resolves to nothing is a usage error even where no RDMA device is there to run on.
  rdmakit::check_resolvable(o.server);
  rdmakit::check_resolvable(o.bind);
}

// Atomics are 8 bytes, one way, at one size.
void validate_atomics(const Options& o, bool size_given, bool kind_given) {
  if (o.operation != bw::Operation::atomic) {
    if (kind_given) throw rdmakit::UsageError("--atomic chooses the atomic of --op atomic");
    return;
  }
  if (size_given && o.size != bw::atomic_size) {
    throw rdmakit::UsageError(
        fmt::format("--op atomic works on {} bytes; -s {} does not apply", bw::atomic_size, o.size));
  }
  if (o.sweep) throw rdmakit::UsageError("--op atomic works on 8 bytes: -a has no sizes to sweep");
}

// The results into the report, with how the text shows them; runs on success and on failure.
// After a run that completed, the rows held against the gate's limits and baseline.
void finish(const Options& o, rdmakit::BwResults& results, rdmakit::Report& report, bool completed) {
  results.persistent = o.persistent;
  results.gbits = o.gbits;
  std::optional<rdmakit::GateResult> gate;
  if (completed && (o.limits.any() || o.baseline))
    gate = rdmakit::check_rows(results, o.limits, o.baseline, o.tolerance);
  rdmakit::report_results(std::move(results), report);
  if (!gate) return;
  const auto failed = !gate->passed();
  const auto summary = gate->summary();
  report.add(std::move(*gate));
  if (failed) {
    report.fail({.message = "below the gate: " + summary, .call = "", .errnum = 0, .hint = "", .completion = {}});
  }
}

void add_gate_options(CLI::App& app, Options& o) {
  // Text that is no number is left to FiniteNumber to refuse.
  const CLI::Validator above_zero(
      [](std::string& text) {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        return end != text.c_str() && value <= 0 ? std::string("must be above 0") : std::string();
      },
      "", "above zero");
  app.add_option("--expect-bw", o.limits.min_bw_mib_per_s,
                 "Exit 1 when a bandwidth row's average falls below this many MiB/s (CI gate)")
      ->check(rdmakit::FiniteNumber())
      ->check(above_zero);
  app.add_option("--expect-rate", o.limits.min_rate_mpps,
                 "Exit 1 when a bandwidth row's message rate falls below this many Mpps")
      ->check(rdmakit::FiniteNumber())
      ->check(above_zero);
  app.add_option("--expect-lat-p99", o.limits.max_lat_p99_us,
                 "Exit 1 when a latency row's 99th percentile rises above this many microseconds")
      ->check(rdmakit::FiniteNumber())
      ->check(above_zero);
  auto* baseline = app.add_option("--baseline", o.baseline_file,
                                  "An earlier run's JSON report (send_bw --json): exit 1 when a row of the same size "
                                  "regressed beyond --tolerance")
                       ->type_name("FILE");
  app.add_option("--tolerance", o.tolerance,
                 "With --baseline: the fraction bandwidth may fall and latency rise (0.1 = 10%)")
      ->capture_default_str()
      ->check(rdmakit::FiniteNumber())
      ->check(CLI::Range(0.0, 10.0))
      ->needs(baseline);
}

rdmakit::BwSettings settings_of(const Options& o, const rdmakit::CommonOptions& common, int stop_fd) {
  rdmakit::BwSettings s{.server = o.server,
                        .bind = o.bind,
                        .port = o.port,
                        .device = o.device,
                        .operation = o.operation,
                        .test = o.test,
                        .sizes = sizes_of(o),
                        .budget = {.iterations = o.iterations, .duration = std::nullopt},
                        .warmup = o.warmup,
                        .depth = o.depth,
                        .inline_size = o.inline_size,
                        .queue_pairs = o.queue_pairs,
                        .bidirectional = o.bidirectional,
                        .gid_index = o.gid_index,
                        .mtu = std::nullopt,
                        .traffic_class = std::nullopt,
                        .ack_timeout = std::nullopt,
                        .retry_count = static_cast<std::uint8_t>(o.retry_count),
                        .counters = o.counters,
                        .histogram = o.histogram,
                        .cpu_util = o.cpu_util,
                        .events = o.events,
                        .atomic = o.atomic,
                        .use_hugepages = o.use_hugepages,
                        .pin_core = o.pin_core,
                        .interval = std::nullopt,
                        .rate_limit = std::nullopt,
                        .rate_units = o.rate_units,
                        .max_size = o.max_size,
                        .accept_timeout = std::nullopt,
                        .persistent = o.persistent,
                        .limits = {.stop_fd = stop_fd, .timeout = common.timeout()}};
  if (o.duration_s > 0) {
    s.budget.duration = std::chrono::nanoseconds(static_cast<long long>(o.duration_s * 1e9));
  }
  if (o.mtu != 0) s.mtu = rdmakit::mtu_from_bytes(o.mtu);
  if (o.rate_limit > 0) s.rate_limit = o.rate_limit;
  if (o.interval_s > 0) s.interval = std::chrono::nanoseconds(static_cast<long long>(o.interval_s * 1e9));
  if (o.traffic_class) s.traffic_class = static_cast<std::uint8_t>(*o.traffic_class);
  if (o.ack_timeout) s.ack_timeout = static_cast<std::uint8_t>(*o.ack_timeout);
  s.accept_timeout = o.accept_timeout();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  rdmakit::ToolRunner tool("send_bw",
                           "RDMA bandwidth and latency over rdma_cm: SEND, RDMA WRITE or READ (perftest's "
                           "ib_send_bw / ib_send_lat, scriptable)",
                           "");
  tool.enable_diagnose(rdmakit::diag::diagnose_for_tool);
  tool.enable_json_file();
  Options o;
  tool.rename_argument("op", "operation");
  tool.rename_argument("all", "sweep");
  tool.rename_argument("iters", "iterations");
  tool.rename_argument("duration", "duration_s");
  tool.rename_argument("tx-depth", "depth");
  tool.rename_argument("qp", "queue_pairs");
  auto& app = tool.app();
  app.add_option("server", o.server, "Server address (client mode); without it, run as the server");
  app.add_option("--bind", o.bind, "Local address (server: listen address)");
  app.add_option("-p,--port", o.port, "Port")->capture_default_str()->check(CLI::Range(1, 65535));
  app.add_option("-d,--ib-dev", o.device, "RDMA device the address must resolve to (checked)");
  app.add_option("--test", o.test, "bw (bandwidth) or lat (latency)")
      ->transform(rdmakit::one_of<bw::Test>({{"bw", bw::Test::bandwidth}, {"lat", bw::Test::latency}}))
      ->default_str("bw");
  app.add_flag("--lat", o.latency_flag, "Same as --test lat");
  app.add_option("--op", o.operation, "send, write, read or atomic (8 bytes, --atomic)")
      ->transform(rdmakit::one_of<bw::Operation>({{"send", bw::Operation::send},
                                                  {"write", bw::Operation::write},
                                                  {"read", bw::Operation::read},
                                                  {"atomic", bw::Operation::atomic}}))
      ->default_str("send");
  auto* atomic =
      app.add_option("--atomic", o.atomic, "With --op atomic: fetch-add or compare-swap")
          ->transform(rdmakit::one_of<rdmakit::AtomicKind>(
              {{"fetch-add", rdmakit::AtomicKind::fetch_add}, {"compare-swap", rdmakit::AtomicKind::compare_swap}}))
          ->default_str("fetch-add");
  auto* size = app.add_option("-s,--size", o.size, "Message bytes (latency test: 2)")
                   ->capture_default_str()
                   ->check(CLI::Range(1u, bw::max_message_size));
  app.add_flag("-a,--all", o.sweep, "Sweep sizes 2 B to 8 MiB (powers of two)")->excludes(size);
  auto* iterations = app.add_option("-n,--iters", o.iterations, "Messages per size (per queue pair)")
                         ->capture_default_str()
                         ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
  auto* duration = app.add_option("-D,--duration", o.duration_s, "Run for this many seconds instead of -n")
                       ->check(rdmakit::FiniteNumber())
                       ->check(CLI::Range(0.001, 86400.0));
  app.add_option("--warmup", o.warmup, "Unmeasured messages before each size")->capture_default_str();
  app.add_option("-t,--tx-depth", o.depth, "Work requests in flight per queue pair (server: receives posted)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  app.add_option("-I,--inline", o.inline_size, "Send messages up to this size inline (0: never)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  app.add_option("-q,--qp", o.queue_pairs, "Queue pairs (connections), streamed together")
      ->capture_default_str()
      ->check(CLI::Range(1, static_cast<int>(bw::max_queue_pairs)));
  app.add_flag("-b,--bidirectional", o.bidirectional, "The server sends every message back (--op send)");
  app.add_option("-x,--gid-index", o.gid_index,
                 "Use the address of this GID table entry (default: rdma_cm's choice for the address)")
      ->check(CLI::Range(0, 65535));
  app.add_option("-m,--mtu", o.mtu, "Path MTU: 256, 512, 1024, 2048 or 4096 (default: the route's)");
  app.add_option("--tclass", o.traffic_class,
                 "Client: the traffic class (IP TOS byte on RoCE, rdma_cm's TOS option) to test through")
      ->check(CLI::Range(0, 255));
  app.add_option("--ack-timeout", o.ack_timeout, "Local ACK timeout, 4.096 us * 2^N (default: rdma_cm's from the path)")
      ->check(CLI::Range(0, 31));
  app.add_option("--retry-count", o.retry_count, "Transport retries before a send fails")
      ->capture_default_str()
      ->check(CLI::Range(0, 7));
  app.add_flag("--counters", o.counters,
               "Client: the port's hardware counters (sysfs) before and after each row, their change in the row");
  app.add_option("--rate-limit", o.rate_limit,
                 "Bandwidth client: pace the sender to this rate (--rate-units), to test a link below line rate")
      ->check(rdmakit::FiniteNumber())
      ->check(CLI::Range(1e-6, 1e9));
  app.add_option("--rate-units", o.rate_units, "--rate-limit's unit: M (MiB/s), g (Gb/s) or p (messages/s)")
      ->capture_default_str()
      ->check(CLI::IsMember({'M', 'g', 'p'}));
  app.add_option("--interval", o.interval_s,
                 "With -D: the bandwidth of each interval of this many seconds too (a time series)")
      ->check(rdmakit::FiniteNumber())
      ->check(CLI::Range(0.01, 3600.0));
  app.add_flag("--cpu-util", o.cpu_util,
               "This side's user and system CPU time over each row (server: over the test), and per message");
  app.add_flag("-e,--events", o.events,
               "Sleep on the completion channel instead of busy polling (each side its own choice)");
  app.add_option("--pin-core", o.pin_core,
                 "Run on this core, with the buffers on the RDMA device's NUMA node (sysfs numa_node)")
      ->check(CLI::Range(0, CPU_SETSIZE - 1));
  app.add_flag("--use-hugepages", o.use_hugepages,
               "This side's buffers in huge pages (reserve them first: sysctl vm.nr_hugepages)");
  app.add_flag("--histogram", o.histogram,
               "Latency client: each row's samples as a histogram in the JSON (scripts/bench-plot.sh draws it)");
  app.add_option("--max-size", o.max_size, "Server: largest message a client may ask for")
      ->capture_default_str()
      ->check(CLI::Range(1u, bw::max_message_size));
  o.add_to(app, "Server: serve clients one after another until stopped",
           "Server: seconds to wait for a client, with -P for each next one (0 = forever)");
  app.add_flag("--report-gbits", o.gbits, "Text table in Gb/s instead of MB/s");
  add_gate_options(app, o);
  return tool.run(
      argc, argv,
      [&] {
        if (o.latency_flag) o.test = bw::Test::latency;
        validate(o, duration->count() > 0, iterations->count() > 0);
        validate_atomics(o, size->count() > 0, atomic->count() > 0);
        if (size->count() == 0 && o.test == bw::Test::latency) o.size = 2;  // perftest's latency default
        if (o.operation == bw::Operation::atomic) o.size = bw::atomic_size;
      },
      [&](rdmakit::Report& report) {
        report.role = o.server.empty() ? "server" : "client";
        const rdmakit::StopSignal stop;
        const auto settings = settings_of(o, tool.common(), stop.fd());
        rdmakit::BwResults results;
        if (!o.server.empty() && o.duration_s == 0) {
          // With -b a row counts both directions.
          report.iterations_requested =
              o.iterations * settings.sizes.size() * o.queue_pairs * (o.bidirectional ? 2 : 1);
        }
        try {
          if (o.server.empty()) {
            rdmakit::run_bw_server(settings, report, results);
          } else {
            rdmakit::run_bw_client(settings, report, results);
          }
        } catch (...) {
          finish(o, results, report, false);
          throw;
        }
        finish(o, results, report, true);
      });
}
