#pragma once
// Bounded waits. Every wait in the suite goes through wait_readable(), so each one has a
// deadline and is cut short by Ctrl-C (SIGINT/SIGTERM/SIGHUP delivered through a signalfd).

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace rdmakit {

// Blocks SIGINT, SIGTERM and SIGHUP (a closed terminal or ssh session, whose default would
// end the process with no report) for this thread (and threads it starts later) and exposes
// them as a file descriptor that becomes readable on delivery. The signal is never read
// from the descriptor, so every thread polling it sees it and can stop on its own. A
// service that rereads its files on SIGHUP (ReloadSignal) leaves SIGHUP out.
class StopSignal {
 public:
  enum class Hangup : std::uint8_t { stops, reloads };
  explicit StopSignal(Hangup hangup = Hangup::stops);
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  int fd() const noexcept { return fd_; }

 private:
  int fd_ = -1;
};

// Blocks SIGHUP (whose default would end the process) and exposes it as a descriptor: a
// service's "read your files again" (systemctl reload). Unlike the stop signal it is read,
// so each SIGHUP is taken once.
class ReloadSignal {
 public:
  ReloadSignal();
  ~ReloadSignal();
  ReloadSignal(const ReloadSignal&) = delete;
  ReloadSignal& operator=(const ReloadSignal&) = delete;

  int fd() const noexcept { return fd_; }
  // True when one or more SIGHUPs came since the last call; never blocks.
  bool take() const;

 private:
  int fd_ = -1;
};

using Clock = std::chrono::steady_clock;

// What ends a run that stops making progress: Ctrl-C (the StopSignal's descriptor; -1: no
// stop signal) and how long it may go without any (a silent CQ, an unanswered request).
struct RunLimits {
  int stop_fd = -1;
  std::chrono::milliseconds timeout{5000};
};

// How long a peer may stay silent (no completion, no CM event, no answer) before it counts
// as gone: the one bound every loop, endpoint and connection group keeps. Progress moves the
// deadline to `limit` after it; without a limit the bound never passes (a server's sink
// that ends with the connection instead). The first deadline may differ from the limit (a
// server that waits for its first message longer, or forever).
class SilenceBound {
 public:
  explicit SilenceBound(std::optional<std::chrono::milliseconds> limit, Clock::time_point start = Clock::now())
      : limit_(limit), deadline_(limit ? start + *limit : Clock::time_point::max()) {}
  SilenceBound(std::optional<std::chrono::milliseconds> limit, Clock::time_point start,
               Clock::time_point first_deadline)
      : SilenceBound(limit, start) {
    deadline_ = first_deadline;
  }

  // Progress at `now`: the peer has `limit` again from here.
  void progressed(Clock::time_point now) {
    noted_ = false;
    if (limit_) deadline_ = now + *limit_;
  }
  // Progress without a clock read (a loop's hot path); passed() dates it at its own `now`.
  void note_progress() noexcept { noted_ = true; }
  // True once the peer has been silent past the deadline at `now`.
  bool passed(Clock::time_point now) {
    if (noted_) progressed(now);
    return now > deadline_;
  }
  // Throws RunStopped(timed_out, message()) once passed(now).
  template <class Message>
  void check(Clock::time_point now, const Message& message) {
    if (passed(now)) throw_timed_out(message());
  }
  // When the silence ends the wait (max without a limit), for a sleep to wake at; progress
  // noted but not yet dated by passed() is not in it.
  Clock::time_point deadline() const noexcept { return deadline_; }
  std::optional<std::chrono::milliseconds> limit() const noexcept { return limit_; }
  // The limit in whole milliseconds, as the messages say it (0 without one).
  long long limit_ms() const noexcept { return limit_ ? limit_->count() : 0; }

 private:
  [[noreturn]] static void throw_timed_out(const std::string& message);

  std::optional<std::chrono::milliseconds> limit_;
  Clock::time_point deadline_;
  bool noted_ = false;
};

// Index (in `fds`) of the first readable descriptor, or nullopt when `deadline` passed.
std::optional<std::size_t> wait_readable(std::initializer_list<int> fds, Clock::time_point deadline);

// Index (in `fds`) of the first readable descriptor. Throws RunStopped(timed_out) at the
// deadline and RunStopped(interrupted) when `stop_fd` fires; `awaiting` says what for.
std::size_t await_readable(std::initializer_list<int> fds, int stop_fd, Clock::time_point deadline,
                           const std::string& awaiting);

std::size_t await_readable(const std::vector<int>& fds, int stop_fd, Clock::time_point deadline,
                           const std::string& awaiting);

// How a wait for a socket's events ended.
enum class SocketWait { ready, timed_out, stopped };

// Waits until `fd` has any of `events` (POLLIN, POLLOUT; an error or hang-up counts too),
// the deadline passes or `stop_fd` (-1: none) fires. A deadline already past still looks
// once, without waiting: await_events(fd, POLLIN, -1, Clock::now()) asks "readable now?".
SocketWait await_events(int fd, short events, int stop_fd, Clock::time_point deadline);

void set_nonblocking(int fd, const char* what);

double elapsed_ms(Clock::time_point since);

// A timeout as the int milliseconds librdmacm's resolve calls take, clamped to int's range.
int timeout_ms(std::chrono::milliseconds timeout);

}  // namespace rdmakit
