#include "lib/tool/run_outcome.hpp"

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <system_error>

namespace rdmakit {

namespace {

// Whether user space can reach any RDMA device: each has a uverbsN entry in
// infiniband_verbs once ib_uverbs serves it. Without one, an ENODEV from whichever call a tool makes first
// (rdma_getaddrinfo in rdma_server) means the run could not start here at all: exit 77.
bool verbs_device_present() {
  std::error_code error;
  // Beside the uverbsN entries the folder holds abi_version, with or without a device.
  for (std::filesystem::directory_iterator entry("/sys/class/infiniband_verbs", error), end; !error && entry != end;
       entry.increment(error)) {
    if (entry->path().filename().string().starts_with("uverbs")) return true;
  }
  return false;
}

}  // namespace

ExitCode exit_code_for(const RdmaError& error) {
  const bool channel_refused =
      error.call() == "rdma_create_event_channel" && (error.errnum() == ENODEV || error.errnum() == ENOENT);
  return channel_refused || !verbs_device_present() ? ExitCode::no_device : ExitCode::run_failed;
}

// The exit code for a run that ended "interrupted": the stop signals stay blocked and
// pending (lib/wait reads them through a signalfd without consuming them), so the pending
// set says which one arrived. SIGTERM wins over SIGHUP, SIGHUP over SIGINT.
ExitCode stop_signal_exit_code() {
  sigset_t pending;
  sigemptyset(&pending);
  if (sigpending(&pending) != 0) return ExitCode::interrupted;
  if (sigismember(&pending, SIGTERM) == 1) return ExitCode::terminated;
  if (sigismember(&pending, SIGHUP) == 1) return ExitCode::hung_up;
  return ExitCode::interrupted;
}

void run_guarded(Report& report, const std::function<void(Report&)>& body,
                 const std::function<void(const RdmaError&)>& after_rdma_error) {
  const auto started = std::chrono::steady_clock::now();
  try {
    body(report);
  } catch (const RdmaError& error) {
    report.fail(record_of(error, report.siblings), exit_code_for(error));
    after_rdma_error(error);
  } catch (const RunStopped& stopped) {
    report.stop(stopped.reason(), stopped.what());
  } catch (const CompletionError& error) {
    report.fail(record_of(error));
  } catch (const UsageError& error) {
    report.fail(ErrorRecord{.message = error.what(), .call = {}, .errnum = 0, .hint = {}, .completion = {}},
                ExitCode::usage);
  } catch (const Unsupported& error) {
    report.fail(ErrorRecord{.message = error.what(), .call = {}, .errnum = 0, .hint = {}, .completion = {}},
                ExitCode::no_device);
    report.outcome = Outcome::unsupported;
  } catch (const std::exception& error) {
    report.fail(ErrorRecord{.message = error.what(), .call = {}, .errnum = 0, .hint = {}, .completion = {}});
  }
  if (report.outcome == Outcome::interrupted) {
    report.exit_code = stop_signal_exit_code();
  }
  report.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

}  // namespace rdmakit
