// send_bw: a perftest-class bandwidth and latency tool over the documented rdma_cm flow.
// The client's rdma_connect carries a versioned hello (test, operation, largest message,
// depth, queue pairs) and the server's rdma_accept answers with its buffer; then the client
// measures SEND, RDMA WRITE, RDMA READ or atomics at one size (-s) or a sweep (-a). The
// flags, their checks and the run live in lib/send_bw/bw_options, the flows in
// lib/send_bw/send_bw_session, the loops in lib/send_bw/loops; this file parses and runs.

#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "lib/send_bw/bw_options.hpp"
#include "lib/send_bw/perftest_flags.hpp"

int main(int argc, char** argv) {
  rdmakit::ToolRunner tool("send_bw",
                           "RDMA bandwidth and latency over rdma_cm: SEND, RDMA WRITE, READ or atomics "
                           "(perftest's ib_send_bw / ib_send_lat and their kin, scriptable)",
                           "");
  tool.enable_diagnose();
  tool.enable_json_file(",--out_json_file");
  tool.rename_argument("op", "operation");
  tool.rename_argument("all", "sweep");
  tool.rename_argument("iters", "iterations");
  tool.rename_argument("duration", "duration_s");
  tool.rename_argument("tx-depth", "depth");
  tool.rename_argument("qp", "queue_pairs");
  rdmakit::BwOptions o;
  o.add_to(tool.app());
  const rdmakit::PerftestFlags perftest(tool.app(), o);
  std::vector<std::string> notes;
  return tool.run(
      argc, argv,
      [&] {
        notes = rdmakit::read_perftest_flags(o, perftest);
        if (o.out_json) tool.default_json_file(rdmakit::perftest_json_file);
        rdmakit::check_bw_options(o);
      },
      [&](rdmakit::Report& report) {
        for (const auto& note : notes) spdlog::warn("{}", note);
        rdmakit::run_send_bw(o, tool.common(), report);
      });
}
