// udaddy: unreliable datagrams over rdma_cm, interoperable with rdma-core's udaddy. The
// client resolves and connects (SIDR) one UD QP per connection, takes the server's path,
// QP number and Q_Key from ESTABLISHED, and sends; the server answers each connection to
// the address and QP number carried by its first datagram. A lost datagram ends the run
// at the timeout with the counts so far instead of hanging.
// The session lives in lib/cm_tools/udaddy_session.

#include "lib/cm_tools/udaddy_session.hpp"
#include "lib/tool/cli.hpp"

int main(int argc, char** argv) {
  rdmakit::ToolRunner tool("udaddy", "UD datagrams over rdma_cm (interoperates with rdma-core udaddy)");
  tool.enable_diagnose();
  rdmakit::UdaddyOptions options;
  options.add_to(tool);
  return tool.run(
      argc, argv, [&] { options.check(); },
      [&](rdmakit::Report& report) { rdmakit::run_udaddy(options, tool.common(), report); });
}
