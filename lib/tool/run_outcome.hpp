#pragma once
// How a tool's run ends up in its report and exit code: whatever the body throws becomes the
// report's error and outcome, a failed call's exit code says whether the run could start here
// at all (77) or failed (1), and a run stopped by a signal exits as the shell would report it.

#include <functional>

#include "lib/base/error.hpp"
#include "lib/base/report.hpp"

namespace rdmakit {

// 77 where the run could not start here at all (no rdma_cm, no device user space can reach),
// 1 for any other failed call.
ExitCode exit_code_for(const RdmaError& error);

// The exit code of a run that ended "interrupted": 143 for SIGTERM, 129 for SIGHUP, 130 for
// SIGINT, read from the signals still pending.
ExitCode stop_signal_exit_code();

// Runs `body` on `report` and records how it ended: an exception becomes the report's error
// (a failed call's hint naming siblings as report.siblings has them) with its exit code, and
// `after_rdma_error` sees a failed call once it is recorded (--diagnose); the duration last.
void run_guarded(Report& report, const std::function<void(Report&)>& body,
                 const std::function<void(const RdmaError&)>& after_rdma_error);

}  // namespace rdmakit
