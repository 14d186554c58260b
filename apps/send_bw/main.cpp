// send_bw: a perftest-class bandwidth and latency tool over the documented rdma_cm flow.
// The client's rdma_connect carries a versioned hello (test, operation, largest message,
// depth, queue pairs) and the server's rdma_accept answers with its buffer; then the client
// measures SEND, RDMA WRITE, RDMA READ or atomics at one size (-s) or a sweep (-a). The
// flows live in lib/bench/bw_session, the loops in lib/bench/loops, the options' checks in
// lib/bench/bw_options; this file registers the flags and runs.

#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "lib/bench/bw_options.hpp"
#include "lib/bench/perftest_flags.hpp"
#include "lib/core/progress.hpp"
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

int main(int argc, char** argv) {
  namespace bw = rdmakit::bw;
  rdmakit::ToolRunner tool("send_bw",
                           "RDMA bandwidth and latency over rdma_cm: SEND, RDMA WRITE, READ or atomics "
                           "(perftest's ib_send_bw / ib_send_lat and their kin, scriptable)",
                           "");
  tool.enable_diagnose(rdmakit::diag::diagnose_for_tool);
  tool.enable_json_file(",--out_json_file");
  rdmakit::BwOptions o;
  tool.rename_argument("op", "operation");
  tool.rename_argument("all", "sweep");
  tool.rename_argument("iters", "iterations");
  tool.rename_argument("duration", "duration_s");
  tool.rename_argument("tx-depth", "depth");
  tool.rename_argument("qp", "queue_pairs");
  auto& app = tool.app();
  app.add_option("server", o.server, "Server address (client mode); without it, run as the server");
  app.add_option("--bind,--source_ip", o.bind, "Local address (server: listen address)");
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
  app.add_option("-I,--inline,--inline_size", o.inline_size, "Send messages up to this size inline (0: never)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  app.add_option("-q,--qp", o.queue_pairs, "Queue pairs (connections), streamed together")
      ->capture_default_str()
      ->check(CLI::Range(1, static_cast<int>(bw::max_queue_pairs)));
  app.add_option("-c,--connection", o.connection,
                 "RC, or UD: datagrams over rdma_cm's UDP port space (send bandwidth, sizes up to the MTU, "
                 "lost datagrams counted); both sides")
      ->capture_default_str()
      ->transform(rdmakit::connection_type());
  app.add_flag("-b,--bidirectional", o.bidirectional, "The server sends every message back (--op send)");
  app.add_option("-x,--gid-index", o.gid_index,
                 "Use the address of this GID table entry (default: rdma_cm's choice for the address)")
      ->check(CLI::Range(0, 65535));
  app.add_option("-m,--mtu", o.mtu, "Path MTU: 256, 512, 1024, 2048 or 4096 (default: the route's)");
  app.add_option("-T,--tclass,--tos", o.traffic_class,
                 "Client: the traffic class (IP TOS byte on RoCE, rdma_cm's TOS option) to test through")
      ->check(CLI::Range(0, 255));
  app.add_option("-u,--ack-timeout,--qp-timeout", o.ack_timeout,
                 "Local ACK timeout, 4.096 us * 2^N (default: rdma_cm's from the path)")
      ->check(CLI::Range(0, 31));
  app.add_option("--retry-count,--retry_count", o.retry_count, "Transport retries before a send fails")
      ->capture_default_str()
      ->check(CLI::Range(0, 7));
  app.add_flag("--counters", o.counters,
               "Client: the port's hardware counters (sysfs) before and after each row, their change in the row");
  app.add_option("--rate-limit", o.rate_limit,
                 "Bandwidth client: pace the sender to this rate (--rate-units), to test a link below line rate")
      ->check(rdmakit::FiniteNumber())
      ->check(CLI::Range(1e-6, 1e9));
  auto* rate_units =
      app.add_option("--rate-units,--rate_units", o.rate_units,
                     "--rate-limit's unit: M (MiB/s), g (Gb/s) or p (messages/s); perftest's --rate_limit: g")
          ->capture_default_str()
          ->check(CLI::IsMember({'M', 'g', 'p'}));
  app.add_option("--interval", o.interval_s,
                 "With -D: the bandwidth of each interval of this many seconds too (a time series)")
      ->check(rdmakit::FiniteNumber())
      ->check(CLI::Range(0.01, 3600.0));
  app.add_flag("--cpu-util,--cpu_util", o.cpu_util,
               "This side's user and system CPU time over each row (server: over the test), and per message");
  app.add_flag("-e,--events", o.events,
               "Sleep on the completion channel instead of busy polling (each side its own choice)");
  app.add_option("--pin-core", o.pin_core,
                 "Run on this core, with the buffers on the RDMA device's NUMA node (sysfs numa_node)")
      ->check(CLI::Range(0, CPU_SETSIZE - 1));
  app.add_flag("--use-hugepages,--use_hugepages", o.use_hugepages,
               "This side's buffers in huge pages (reserve them first: sysctl vm.nr_hugepages)");
  app.add_flag("--histogram", o.histogram,
               "Latency client: each row's samples as a histogram in the JSON (scripts/bench-plot.sh draws it)");
  app.add_option("--max-size", o.max_size, "Server: largest message a client may ask for")
      ->capture_default_str()
      ->check(CLI::Range(1u, bw::max_message_size));
  o.add_to(app, "Server: serve clients one after another until stopped",
           "Server: seconds to wait for a client, with -P for each next one (0 = forever)");
  app.add_flag("--report-gbits,--report_gbits", o.gbits, "Text table in Gb/s instead of MB/s");
  rdmakit::add_gate_options(app, o);
  rdmakit::ProgressOptions progress_options;
  progress_options.add_to(app);
  const rdmakit::PerftestFlags perftest(app, o);
  std::vector<std::string> notes;
  return tool.run(
      argc, argv,
      [&] {
        if (o.latency_flag) o.test = bw::Test::latency;
        bool duration_given = duration->count() > 0;
        notes = perftest.apply(o, duration_given, iterations->count() > 0, rate_units->count() > 0);
        if (o.out_json) tool.default_json_file(rdmakit::perftest_json_file);
        rdmakit::validate_bw_atomics(o, size->count() > 0, atomic->count() > 0);
        rdmakit::apply_bw_defaults(o, size->count() > 0);
        rdmakit::validate_bw_options(o, duration_given, iterations->count() > 0);
        // A name that resolves to nothing is a usage error even where no RDMA device is there to run on.
        rdmakit::check_resolvable(o.server);
        rdmakit::check_resolvable(o.bind);
      },
      [&](rdmakit::Report& report) {
        for (const auto& note : notes) spdlog::warn("{}", note);
        report.role = o.server.empty() ? "server" : "client";
        const rdmakit::StopSignal stop;
        auto progress = rdmakit::Progress::for_stderr(progress_options, o.run_forever);
        auto settings = rdmakit::bw_settings(o, tool.common(), stop.fd());
        rdmakit::show_bw_progress(settings, progress, o.gbits);
        rdmakit::BwResults results;
        results.gbits = o.gbits;
        if (!o.server.empty() && o.duration_s == 0) {
          // With -b a row counts both directions; a datagram run's one size is the MTU.
          report.iterations_requested = o.iterations * std::max<std::size_t>(settings.sizes.size(), 1) * o.queue_pairs *
                                        (o.bidirectional ? 2 : 1);
        }
        try {
          if (o.server.empty()) {
            rdmakit::run_bw_server(settings, report, results);
          } else {
            rdmakit::run_bw_client(settings, report, results);
          }
        } catch (...) {
          rdmakit::finish_bw_report(o, results, report, false);
          throw;
        }
        rdmakit::finish_bw_report(o, results, report, true);
      });
}
