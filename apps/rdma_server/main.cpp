// rdma_server: the synchronous librdmacm flow of rdma_cm(7) on the passive side
// (rdma_getaddrinfo with RAI_PASSIVE, rdma_create_ep, rdma_listen, rdma_get_request,
// rdma_reg_msgs, rdma_post_recv, rdma_accept, rdma_get_recv_comp, rdma_post_send,
// rdma_get_send_comp, rdma_disconnect), interoperable with rdma-core's rdma_client.

#include "lib/bench/rdma_client_server_session.hpp"
#include "lib/core/cli.hpp"
#include "lib/probe/host_probe.hpp"
#include "lib/rdma/cm.hpp"

int main(int argc, char** argv) {
  rdmakit::ToolRunner tool("rdma_server", "Synchronous rdma_cm server (interoperates with rdma-core rdma_client)");
  tool.enable_diagnose(rdmakit::diag::diagnose_for_tool);
  rdmakit::EchoServerOptions options;
  auto& app = tool.app();
  app.add_option("-s,--server", options.server, "Address to listen on")->capture_default_str();
  app.add_option("-p,--port", options.port, "Port to listen on")->capture_default_str()->check(CLI::Range(1, 65535));
  options.add_to(app, "Keep serving clients, each on a thread of its own",
                 "Seconds to wait for a client, with -P for each next one (0 = forever)");
  app.add_flag("--no-inline", options.no_inline, "Send from registered memory even where inline sends work");
  return tool.run(
      argc, argv,
      // rdma_getaddrinfo needs an RDMA device before it looks at the name at all.
      [&] { rdmakit::check_resolvable(options.server); },
      [&](rdmakit::Report& report) {
        report.role = "server";
        rdmakit::run_rdma_server(options, tool.common().timeout(), report);
      });
}
