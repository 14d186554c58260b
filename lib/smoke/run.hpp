#pragma once
// Carries out rdma_smoke's cases: each server started and awaited until it is ready, the
// client run, every process bounded by the case's time and ended if it outlives it, and the
// outcome judged from exit codes and the tools' own JSON reports.

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/child_process.hpp"
#include "lib/smoke/plan.hpp"

namespace rdmakit::smoke {

// One process of a case, as it ran.
struct ToolRun {
  std::string role;  // "server" or "client"
  std::vector<std::string> command;
  ChildOutcome outcome;
  nlohmann::json report;  // its --json report; null when it printed none that parses
};

enum class CaseOutcome { passed, failed, skipped };
inline constexpr std::array<std::string_view, 3> case_outcome_names{"passed", "failed", "skipped"};
std::string to_string(CaseOutcome outcome);

struct CaseResult {
  std::string name;
  std::string tool;
  std::string address;
  Direction direction = Direction::local;
  CaseOutcome outcome = CaseOutcome::failed;
  std::string reason;  // one line: why it failed or was skipped; for a pass, what it measured
  std::string hint;    // the failing tool's hint, "" when none
  bool interrupted = false;
  double seconds = 0;
  std::vector<ToolRun> runs;
};

// What the runner needs from the host, given by the app so that this layer needs no RDMA.
struct RunEnvironment {
  std::function<std::string(const std::string& tool)> program;  // the tool's executable path
  // Whether process `pid` has an rdma_cm id listening on `port` (another process's listener
  // there must not pass for the server's).
  std::function<bool(std::uint16_t port, pid_t pid)> listening;
  int stop_fd = -1;  // Ctrl-C
};

// A case's servers on this host (rdma_smoke alone, or the --serve side): started in order,
// each awaited until ready; finished once the client is done.
class CaseServers {
 public:
  CaseServers(const SmokeCase& smoke_case, const RunEnvironment& environment, Clock::time_point deadline);
  // Why they are not all ready: a server that did not get ready in time ("" otherwise; a
  // server that ended early says why in its own run).
  const std::string& start_failure() const { return start_failure_; }
  bool ready() const { return ready_; }
  // Their runs: ended now unless the client passed, else given until the deadline.
  std::vector<ToolRun> finish(bool client_passed, Clock::time_point deadline);

 private:
  int stop_fd_;
  std::string start_failure_;
  bool ready_ = false;
  std::vector<std::pair<std::vector<std::string>, std::unique_ptr<ChildProcess>>> servers_;
};

// The case's result as it starts: its name, tool and address, no runs yet.
CaseResult result_of(const SmokeCase& smoke_case);
Clock::time_point case_deadline(const SmokeCase& smoke_case, Clock::time_point started);
ToolRun run_client(const SmokeCase& smoke_case, const RunEnvironment& environment, Clock::time_point deadline);
// The case's outcome from its runs (the client's and the servers'), as run_case does.
void judge(CaseResult& result, const std::string& start_failure);

CaseResult run_case(const SmokeCase& smoke_case, const RunEnvironment& environment);
// A case with its servers on this host and its client run by `client` once they are ready
// (here, or on the peer), bounded by the deadline it is given.
CaseResult run_with_servers_here(const SmokeCase& smoke_case, const RunEnvironment& environment,
                                 const std::function<ToolRun(Clock::time_point deadline)>& client);

// The verdict over one process's run: "" when it did what it should (exit 0), else the line
// that says why, from its report's first error, its verdict, its last line on stderr, or
// how it ended. Pure, for the unit tests.
std::string failure_of(const ToolRun& run);

}  // namespace rdmakit::smoke
