// diag-bind: explains why rdma_bind_addr (or address/route resolution) fails on this host,
// by putting the kernel's and user space's views of the RDMA devices side by side with a
// real attempt, and naming the cause with the command that fixes it.

#include "lib/diag/attached_answer.hpp"
#include "lib/diag/bind_session.hpp"
#include "lib/tool/cli.hpp"

int main(int argc, char** argv) {
  // Another tool's --diagnose, passed on to this program (lib/tool/attached_diagnosis.hpp).
  if (const auto answered = rdmakit::diag::answer_attached_diagnosis(argc, argv)) return *answered;
  rdmakit::ToolRunner runner("diag-bind", "Explain why an RDMA address bind or resolution fails on this host");
  // Nothing connects or is measured; the address diagnosed is the report's "address".
  runner.report_groups({.connection = false, .measurement = false});
  rdmakit::diag::BindOptions options;
  options.add_to(runner);
  runner.footer(
      "Exit status: 0 the address is usable, 1 a cause was found (see 'verdict'), 2 usage error, 3 the failure could "
      "not be explained (the raw data is printed). With --gids: 0 the table (and an index for the address), 1 the "
      "address has no GID, 77 no RDMA device.");
  rdmakit::diag::BindSession session(options);
  return runner.run(
      argc, argv, [&] { session.prepare(); }, [&](rdmakit::Report& report) { session.run(runner.common(), report); });
}
