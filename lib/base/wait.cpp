#include "lib/base/wait.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <initializer_list>
#include <limits>
#include <vector>

#include "lib/base/error.hpp"

namespace rdmakit {

namespace {

// Blocks `signals` for this thread (and the threads it starts later) and returns a
// non-blocking signalfd that becomes readable when one is delivered.
int blocked_signal_fd(std::initializer_list<int> signals, const char* names) {
  sigset_t set;
  sigemptyset(&set);
  for (const int signal : signals) sigaddset(&set, signal);
  if (const int err = pthread_sigmask(SIG_BLOCK, &set, nullptr); err != 0) {
    throw RdmaError("pthread_sigmask", names, err);
  }
  const int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) throw RdmaError("signalfd", names, errno);
  return fd;
}

}  // namespace

StopSignal::StopSignal(Hangup hangup)
    : fd_(hangup == Hangup::stops ? blocked_signal_fd({SIGINT, SIGTERM, SIGHUP}, "SIGINT,SIGTERM,SIGHUP")
                                  : blocked_signal_fd({SIGINT, SIGTERM}, "SIGINT,SIGTERM")) {}

StopSignal::~StopSignal() {
  if (fd_ >= 0) {
    close(fd_);
  }
}

ReloadSignal::ReloadSignal() : fd_(blocked_signal_fd({SIGHUP}, "SIGHUP")) {}

ReloadSignal::~ReloadSignal() {
  if (fd_ >= 0) close(fd_);
}

bool ReloadSignal::take() const {
  bool taken = false;
  signalfd_siginfo info{};
  while (read(fd_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) taken = true;
  return taken;
}

namespace {

std::optional<std::size_t> wait_any(const std::vector<int>& fds, Clock::time_point deadline) {
  std::vector<pollfd> polls;
  polls.reserve(fds.size());
  for (const int fd : fds) {
    polls.push_back(pollfd{.fd = fd, .events = POLLIN, .revents = 0});
  }
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    // A far deadline ("forever") is waited for in one-hour polls rather than overflowing int.
    const int timeout_ms = static_cast<int>(std::clamp<long long>(left.count(), 0, 3'600'000));
    const int n = poll(polls.data(), polls.size(), timeout_ms);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      throw RdmaError("poll", "", errno);
    }
    for (std::size_t i = 0; i < polls.size(); ++i) {
      if (polls[i].revents != 0) {
        return i;
      }
    }
    if (Clock::now() >= deadline) {
      return std::nullopt;
    }
  }
}

}  // namespace

SocketWait await_events(int fd, short events, int stop_fd, Clock::time_point deadline) {
  std::array<pollfd, 2> polls{pollfd{.fd = fd, .events = events, .revents = 0},
                              pollfd{.fd = stop_fd, .events = POLLIN, .revents = 0}};
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    const int timeout_ms = static_cast<int>(std::clamp<long long>(left.count(), 0, 3'600'000));
    const int n = poll(polls.data(), stop_fd >= 0 ? 2 : 1, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw RdmaError("poll", "", errno);
    if (stop_fd >= 0 && (polls[1].revents & POLLIN) != 0) return SocketWait::stopped;
    if (n > 0) return SocketWait::ready;
    if (timeout_ms == 0) return SocketWait::timed_out;
  }
}

std::optional<std::size_t> wait_readable(std::initializer_list<int> fds, Clock::time_point deadline) {
  return wait_any(std::vector<int>(fds), deadline);
}

std::size_t await_readable(const std::vector<int>& fds, int stop_fd, Clock::time_point deadline,
                           const std::string& awaiting) {
  std::vector<int> all(fds);
  all.push_back(stop_fd);
  const auto ready = wait_any(all, deadline);
  if (!ready) {
    throw RunStopped(StopReason::timed_out, "timed out waiting for " + awaiting);
  }
  if (*ready == fds.size()) {
    throw RunStopped(StopReason::interrupted, "interrupted while waiting for " + awaiting);
  }
  return *ready;
}

std::size_t await_readable(std::initializer_list<int> fds, int stop_fd, Clock::time_point deadline,
                           const std::string& awaiting) {
  return await_readable(std::vector<int>(fds), stop_fd, deadline, awaiting);
}

void SilenceBound::throw_timed_out(const std::string& message) {
  throw RunStopped(StopReason::timed_out, message);
}

void set_nonblocking(int fd, const char* what) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    throw RdmaError("fcntl", what, errno);
  }
}

double elapsed_ms(Clock::time_point since) {
  return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

int timeout_ms(std::chrono::milliseconds timeout) {
  return static_cast<int>(std::clamp<long long>(timeout.count(), 0, std::numeric_limits<int>::max()));
}

}  // namespace rdmakit
