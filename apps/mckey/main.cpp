// mckey: rdma_cm multicast, interoperable with rdma-core's mckey. Each connection joins
// the group on its own UD QP; a receiver counts datagrams, a sender (-s) sends them. Join
// latency is measured per connection, MULTICAST_ERROR and ADDR_CHANGE events are reported,
// and a receiver whose datagrams are lost stops at the timeout with the counts so far.
// The session lives in lib/cm_tools/mckey_session.

#include "lib/cm_tools/mckey_session.hpp"
#include "lib/tool/cli.hpp"

int main(int argc, char** argv) {
  rdmakit::ToolRunner tool("mckey", "rdma_cm multicast sender/receiver (interoperates with rdma-core mckey)");
  tool.enable_diagnose();
  rdmakit::MckeyOptions options;
  options.add_to(tool);
  return tool.run(
      argc, argv, [&] { options.check(); },
      [&](rdmakit::Report& report) { rdmakit::run_mckey(options, tool.common(), report); });
}
