// rping: RDMA ping over rdma_cm, wire-compatible with rdma-core's rping, with timings,
// latency statistics and a JSON report. The session lives in lib/cm_tools/rping_session.

#include "lib/cm_tools/rping_session.hpp"
#include "lib/tool/cli.hpp"

int main(int argc, char** argv) {
  rdmakit::ToolRunner tool("rping", "RDMA ping over rdma_cm (interoperates with rdma-core rping)");
  tool.enable_diagnose();
  rdmakit::RpingOptions options;
  options.add_to(tool);
  return tool.run(
      argc, argv, [&] { options.check(); },
      [&](rdmakit::Report& report) { rdmakit::run_rping(options, tool.common(), report); });
}
