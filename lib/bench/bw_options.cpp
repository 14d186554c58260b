#include "lib/bench/bw_options.hpp"

#include <fmt/format.h>

#include "lib/core/error.hpp"
#include "lib/core/placement.hpp"

namespace rdmakit {

namespace {

// What only the client does: it measures the rows, and it opens the connection.
void validate_client_flags(const BwOptions& o) {
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
    if (given) throw UsageError(why);
  }
}

// The CI gate's flags: the client measures, so they are the client's; each limit fits one
// test; the baseline is read now, so that a bad file is a usage error before any run.
void validate_gate(BwOptions& o) {
  const bool latency = o.test == bw::Test::latency;
  if (o.rate_limit > 0 && latency) {
    throw UsageError("--rate-limit paces a bandwidth test; a latency test has one message in flight");
  }
  for (const auto size : bw_sizes(o)) {
    if (o.rate_limit > 0 && messages_per_s(o.rate_limit, o.rate_units, size) < 1) {
      throw UsageError(
          fmt::format("--rate-limit {}{} is below one {}-byte message a second", o.rate_limit, o.rate_units, size));
    }
  }
  if (o.interval_s > 0 && (latency || o.duration_s == 0)) {
    throw UsageError("--interval cuts a timed bandwidth run (-D) into intervals");
  }
  if (o.histogram && !latency) {
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
    check_baseline_matches(*o.baseline, o.test, o.operation);
  }
}

// -c UD: SEND in datagrams that each fit one packet, one way (latency: each answered).
void validate_datagrams(const BwOptions& o) {
  if (o.connection != "UD") return;
  constexpr std::uint32_t largest_mtu = 4096;
  const std::pair<bool, std::string> refused[] = {
      {o.operation != bw::Operation::send,
       "-c UD carries SEND only: RDMA WRITE, READ and atomics need a connection (-c RC)"},
      {o.bidirectional, "-b needs -c RC: a UD server does not send the datagrams back"},
      {o.mtu != 0, "-m sets a connection's path MTU; UD datagrams go at the port's active MTU"},
      {!o.server.empty() && !o.sweep && o.size > largest_mtu,
       fmt::format("-c UD: -s {} is above 4096, the largest MTU; a datagram is one packet", o.size)}};
  for (const auto& [given, why] : refused) {
    if (given) throw UsageError(why);
  }
}

}  // namespace

std::vector<std::uint32_t> bw_sizes(const BwOptions& o) {
  if (!o.sweep && o.size == 0) return {};
  if (!o.sweep) return {o.size};
  std::vector<std::uint32_t> sizes;
  for (std::uint32_t size = 2; size <= (8U << 20); size *= 2) sizes.push_back(size);
  return sizes;
}

// Flag combinations that cannot work, refused before anything is opened.
void validate_bw_options(BwOptions& o, bool duration_given, bool iterations_given) {
  const bool latency = o.test == bw::Test::latency;
  if (o.mtu != 0) mtu_from_bytes(o.mtu);
  if (duration_given && o.sweep) {
    throw UsageError("-a and -D do not combine: a sweep runs -n iterations per size");
  }
  if (duration_given && iterations_given) {
    throw UsageError("-n and -D do not combine: give a count or a duration");
  }
  if (latency && o.queue_pairs > 1) {
    throw UsageError("-q applies to bandwidth tests; a latency test runs on one queue pair");
  }
  if (latency && o.events && o.operation == bw::Operation::write) {
    throw UsageError(
        "-e does not apply to the write latency test: each side watches its buffer for the peer's write, no "
        "completion announces it");
  }
  if (latency && o.bidirectional) {
    throw UsageError("-b applies to bandwidth tests; a latency test is a round trip already");
  }
  if (o.bidirectional && o.operation != bw::Operation::send) {
    throw UsageError("-b works with --op send: the server sends back each message it receives");
  }
  if (o.persistent && !o.server.empty()) {
    throw UsageError("-P (persistent) is a server option");
  }
  if (o.gid_index && !o.bind.empty()) {
    throw UsageError("-x and --bind both choose the local address: give one");
  }
  if (o.pin_core) check_core_allowed(*o.pin_core);
  validate_datagrams(o);
  validate_client_flags(o);
  validate_gate(o);
}

// Atomics are 8 bytes, one way, at one size.
void validate_bw_atomics(const BwOptions& o, bool size_given, bool kind_given) {
  if (o.operation != bw::Operation::atomic) {
    if (kind_given) throw UsageError("--atomic chooses the atomic of --op atomic");
    return;
  }
  if (size_given && o.size != bw::atomic_size) {
    throw UsageError(fmt::format("--op atomic works on {} bytes; -s {} does not apply", bw::atomic_size, o.size));
  }
  if (o.sweep) throw UsageError("--op atomic works on 8 bytes: -a has no sizes to sweep");
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
  if (o.operation == bw::Operation::atomic) {
    o.size = bw::atomic_size;
  } else if (!size_given && o.test == bw::Test::latency) {
    o.size = 2;
  } else if (!size_given && o.connection == "UD") {
    o.size = 0;
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
  BwSettings s{.server = o.server,
               .bind = o.bind,
               .port = o.port,
               .device = o.device,
               .operation = o.operation,
               .test = o.test,
               .sizes = bw_sizes(o),
               .budget = {.iterations = o.iterations, .duration = std::nullopt},
               .warmup = o.warmup,
               .depth = o.depth,
               .inline_size = o.inline_size,
               .queue_pairs = o.queue_pairs,
               .bidirectional = o.bidirectional,
               .datagram = o.connection == "UD",
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
               .row_done = {},
               .interval_done = {},
               .rate_limit = std::nullopt,
               .rate_units = o.rate_units,
               .max_size = o.max_size,
               .accept_timeout = std::nullopt,
               .persistent = o.persistent,
               .limits = {.stop_fd = stop_fd, .timeout = common.timeout()}};
  if (o.duration_s > 0) {
    s.budget.duration = std::chrono::nanoseconds(static_cast<long long>(o.duration_s * 1e9));
  }
  if (o.mtu != 0) s.mtu = mtu_from_bytes(o.mtu);
  if (o.rate_limit > 0) s.rate_limit = o.rate_limit;
  if (o.interval_s > 0) s.interval = std::chrono::nanoseconds(static_cast<long long>(o.interval_s * 1e9));
  if (o.traffic_class) s.traffic_class = static_cast<std::uint8_t>(*o.traffic_class);
  if (o.ack_timeout) s.ack_timeout = static_cast<std::uint8_t>(*o.ack_timeout);
  s.accept_timeout = o.accept_timeout();
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
