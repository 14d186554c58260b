// rdma_server: the synchronous librdmacm flow of rdma_cm(7) on the passive side
// (rdma_getaddrinfo with RAI_PASSIVE, rdma_create_ep, rdma_listen, rdma_get_request,
// rdma_reg_msgs, rdma_post_recv, rdma_accept, rdma_post_send, the receive and send
// completions, rdma_disconnect), interoperable with rdma-core's rdma_client. The session
// lives in lib/cm_tools/rdma_client_server_session.

#include "lib/cm_tools/rdma_client_server_session.hpp"
#include "lib/tool/cli.hpp"

int main(int argc, char** argv) {
  rdmakit::ToolRunner tool("rdma_server", "Synchronous rdma_cm server (interoperates with rdma-core rdma_client)");
  tool.enable_diagnose();
  rdmakit::EchoServerOptions options;
  options.add_to(tool);
  return tool.run(
      argc, argv, [&] { options.check(); },
      [&](rdmakit::Report& report) { rdmakit::run_rdma_server(options, tool.common().timeout(), report); });
}
