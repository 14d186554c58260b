// ucmatose: many reliable connections set up concurrently through one rdma_cm event
// channel, interoperable with rdma-core's ucmatose (the server sends first, the client
// answers, the server disconnects). Reports a cmtime-style table of every CM step across
// connections and the connection setup rate.
// The session lives in lib/cm_tools/ucmatose_session.

#include "lib/cm_tools/ucmatose_session.hpp"
#include "lib/tool/cli.hpp"

int main(int argc, char** argv) {
  rdmakit::ToolRunner tool("ucmatose",
                           "Concurrent RC connections over rdma_cm (interoperates with rdma-core ucmatose)");
  tool.enable_diagnose();
  rdmakit::UcmatoseOptions options;
  options.add_to(tool);
  return tool.run(
      argc, argv, [&] { options.check(); },
      [&](rdmakit::Report& report) { rdmakit::run_ucmatose(options, tool.common(), report); });
}
