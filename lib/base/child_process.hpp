#pragma once
// A tool run as a child process: started with its output collected (up to a cap), ended at
// its deadline (SIGTERM, then SIGKILL), reaped by its destructor whatever happened.

#include <sys/types.h>

#include <string>
#include <vector>

#include "lib/base/wait.hpp"

namespace rdmakit {

struct ChildOutcome {
  int exit_code = -1;        // -1 when a signal ended it or it never started
  int signal = 0;            // the signal that ended it, 0 for none
  bool timed_out = false;    // it outlived its deadline and was ended
  bool interrupted = false;  // Ctrl-C reached us while it ran; it was ended
  std::string start_error;   // why it could not start ("" when it did)
  std::string out;           // stdout, at most output_cap bytes
  std::string err;           // stderr, likewise
  double seconds = 0;
};

class ChildProcess {
 public:
  static constexpr std::size_t output_cap = 1 << 20;

  // Starts argv[0] (a path) with argv; stdin is /dev/null. A failure to start is kept in the
  // outcome, not thrown: it is the case's result.
  explicit ChildProcess(const std::vector<std::string>& argv);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // Collects output and notices its end until `until` (or it ended); true while it runs.
  bool pump(Clock::time_point until, int stop_fd);
  const std::string& err_so_far() const { return outcome_.err; }
  // Waits for it to end on its own until `deadline`, then ends it; the outcome.
  ChildOutcome finish(Clock::time_point deadline, int stop_fd);
  // Ends it now (SIGTERM, a grace period, SIGKILL); the outcome.
  ChildOutcome end();

 private:
  static void read_available(int fd, std::string& into);
  bool reap(int flags);
  void close_pipes();

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  bool running_ = false;
  Clock::time_point started_at_;
  ChildOutcome outcome_;
};

}  // namespace rdmakit
