// diag-connect: explains why this host cannot talk to another over rdma_cm, by making the
// real attempt step by step (route, address and route resolution, connect, a short data
// check) and comparing this host's view with the one the agent on the other host
// (`diag-connect --serve`) answers over a TCP side channel.

#include "lib/diag/connect_session.hpp"
#include "lib/tool/cli.hpp"

int main(int argc, char** argv) {
  rdmakit::ToolRunner runner("diag-connect", "Explain why two hosts cannot talk over rdma_cm, with both sides' views");
  // It connects but measures nothing: the data check's transfers are in its capture.
  runner.report_groups({.connection = true, .measurement = false});
  rdmakit::diag::ConnectOptions options;
  options.add_to(runner);
  runner.footer(
      "Exit status: 0 the connection and the data check work, 1 a cause was found (see 'verdict'), 2 usage error, 3 "
      "the failure could not be explained (the raw data is printed). The agent (--serve) exits 0 when stopped.");
  return runner.run(
      argc, argv, [&] { options.check(); },
      [&](rdmakit::Report& report) { rdmakit::diag::run_diag_connect(options, runner.common(), report); });
}
