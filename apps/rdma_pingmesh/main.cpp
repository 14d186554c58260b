// rdma_pingmesh: every path from this node to its pinglist's peers probed all the time over
// one UD QP, with each window's loss, network round trip and responder delay, and a state
// per path (ok, lossy, slow, down) for monitoring: JSON lines, OpenMetrics, a log line a
// change. The session lives in lib/pingmesh/pingmesh_session.

#include "lib/diag/connect_probe.hpp"
#include "lib/pingmesh/pingmesh_session.hpp"
#include "lib/tool/cli.hpp"

int main(int argc, char** argv) {
  rdmakit::ToolRunner tool("rdma_pingmesh", "Probe every RDMA path to the pinglist's peers, all the time");
  tool.enable_diagnose();
  tool.report_groups({.connection = false, .measurement = false});
  tool.json_lines();
  rdmakit::PingmeshOptions options;
  options.add_to(tool);
  return tool.run(
      argc, argv, [&] { options.check(); },
      [&](rdmakit::Report& report) {
        // diag-connect's probe of a path gone bad, in-process, as the probes go: a SIDR
        // exchange with the peer's rdma_pingmesh (its port, UDP port space), so that a peer
        // that is not running reads "nothing listens" there. The peer's diag-connect agent
        // is asked at its default port; the local facts stand without it.
        const auto diagnose_path = [port = options.port](const std::string& address, std::chrono::milliseconds timeout,
                                                         std::string& text) {
          return rdmakit::diag::diagnose_connect_failure(address, port, timeout, text, "udp");
        };
        rdmakit::run_pingmesh(options, tool.common(), tool.names().sibling("rdma_pingmesh"), diagnose_path, report);
      });
}
