// rdma_pingmesh: every path from this node to its pinglist's peers probed all the time over
// one UD QP, with each window's loss, network round trip and responder delay, and a state
// per path (ok, lossy, slow, down) for monitoring: JSON lines, OpenMetrics, a log line a
// change. The session lives in lib/pingmesh/pingmesh_session.

#include <cerrno>
#include <stdexcept>
#include <utility>

#include "lib/pingmesh/pingmesh_session.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/tool/attached_diagnosis.hpp"
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
        // diag-connect's probe of a path gone bad, by diag-bind beside this program (as every
        // tool's --diagnose, so that the diagnosers' libraries stay out of this one): a SIDR
        // exchange with the peer's rdma_pingmesh (its port, UDP port space), so that a peer
        // that is not running reads "nothing listens" there. The peer's diag-connect agent
        // is asked at its default port; the local facts stand without it.
        const auto diagnose_path = [port = options.port, diag_bind = tool.names().sibling_path("diag-bind")](
                                       const std::string& address, std::chrono::milliseconds timeout, int cancel_fd,
                                       std::string& text) {
          const auto subject = rdmakit::parse_address(address, port).to_string();
          auto outcome = rdmakit::ask_attached_diagnosis(
              diag_bind, {.error = rdmakit::RdmaError("rdma_connect", subject, ETIMEDOUT, address),
                          .timeout = timeout,
                          .port_space = "udp",
                          .cancel_fd = cancel_fd});
          if (!outcome.answer) throw std::runtime_error(outcome.failure);
          text = std::move(outcome.answer->text);
          return std::move(outcome.answer->diagnosis);
        };
        rdmakit::run_pingmesh(options, tool.common(), tool.names().sibling("rdma_pingmesh"), diagnose_path, report);
      });
}
