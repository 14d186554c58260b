// rdma_client: the synchronous librdmacm flow of rdma_cm(7) (rdma_getaddrinfo,
// rdma_create_ep, rdma_reg_msgs, rdma_post_recv, rdma_connect, rdma_post_send,
// rdma_get_send_comp, rdma_get_recv_comp, rdma_disconnect), interoperable with rdma-core's
// rdma_server, with every wait bounded, per-step timings and round-trip times.

#include <limits>

#include "lib/bench/rdma_client_server_session.hpp"
#include "lib/core/cli.hpp"
#include "lib/probe/host_probe.hpp"
#include "lib/rdma/cm.hpp"

int main(int argc, char** argv) {
  rdmakit::ToolRunner tool("rdma_client", "Synchronous rdma_cm client (interoperates with rdma-core rdma_server)");
  tool.enable_diagnose(rdmakit::diag::diagnose_for_tool);
  rdmakit::EchoClientOptions options;
  auto& app = tool.app();
  app.add_option("-s,--server", options.server, "Server address or name")->capture_default_str();
  app.add_option("-p,--port", options.port, "Server port")->capture_default_str()->check(CLI::Range(1, 65535));
  app.add_option("-C,--count", options.count, "Exchanges on the connection (a stock rdma_server answers one)")
      ->capture_default_str()
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  app.add_flag("--no-inline", options.no_inline, "Send from registered memory even where inline sends work");
  return tool.run(
      argc, argv,
      // rdma_getaddrinfo needs an RDMA device before it looks at the name at all.
      [&] { rdmakit::check_resolvable(options.server); },
      [&](rdmakit::Report& report) {
        report.role = "client";
        report.iterations_requested = options.count;
        rdmakit::run_rdma_client(options, tool.common().timeout(), report);
      });
}
