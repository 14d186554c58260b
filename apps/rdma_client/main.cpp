// rdma_client: the synchronous librdmacm flow of rdma_cm(7) (rdma_getaddrinfo,
// rdma_create_ep, rdma_reg_msgs, rdma_post_recv, rdma_connect, rdma_post_send, the send and
// receive completions, rdma_disconnect), interoperable with rdma-core's rdma_server, with
// every wait bounded, per-step timings and round-trip times. The session lives in
// lib/cm_tools/rdma_client_server_session.

#include "lib/cm_tools/rdma_client_server_session.hpp"
#include "lib/tool/cli.hpp"

int main(int argc, char** argv) {
  rdmakit::ToolRunner tool("rdma_client", "Synchronous rdma_cm client (interoperates with rdma-core rdma_server)");
  tool.enable_diagnose();
  rdmakit::EchoClientOptions options;
  options.add_to(tool);
  return tool.run(
      argc, argv, [&] { options.check(); },
      [&](rdmakit::Report& report) { rdmakit::run_rdma_client(options, tool.common().timeout(), report); });
}
