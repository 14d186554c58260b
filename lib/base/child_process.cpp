#include "lib/base/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <thread>

namespace rdmakit {

namespace {

constexpr auto grace = std::chrono::seconds(3);
constexpr auto slice = std::chrono::milliseconds(50);

// posix_spawn's file actions and attributes, destroyed however the start ends.
struct SpawnSetup {
  posix_spawn_file_actions_t actions{};
  posix_spawnattr_t attributes{};
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attributes);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
};

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv) : started_at_(Clock::now()) {
  std::array<int, 2> out{-1, -1};
  std::array<int, 2> err{-1, -1};
  if (pipe2(out.data(), O_CLOEXEC) != 0 || pipe2(err.data(), O_CLOEXEC) != 0) {
    outcome_.start_error = std::string("pipe2: ") + std::strerror(errno);
    for (const int fd : {out[0], out[1], err[0], err[1]}) {
      if (fd >= 0) close(fd);
    }
    return;
  }
  SpawnSetup setup;
  posix_spawn_file_actions_addopen(&setup.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&setup.actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&setup.actions, err[1], STDERR_FILENO);
  // We block SIGINT/SIGTERM/SIGHUP (StopSignal); the tool must not inherit that, or ending it at
  // its deadline would not reach it. Its own process group keeps a terminal's Ctrl-C ours:
  // we end each child and report it.
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (const int s : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&setup.attributes, &none);
  posix_spawnattr_setsigdefault(&setup.attributes, &defaults);
  posix_spawnattr_setpgroup(&setup.attributes, 0);
  posix_spawnattr_setflags(&setup.attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const int rc = posix_spawn(&pid_, argv.at(0).c_str(), &setup.actions, &setup.attributes, args.data(), environ);
  close(out[1]);
  close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
  if (rc != 0) {
    pid_ = -1;
    outcome_.start_error = argv.at(0) + ": " + std::strerror(rc);
    close_pipes();
    return;
  }
  running_ = true;
  fcntl(out_fd_, F_SETFL, O_NONBLOCK);
  fcntl(err_fd_, F_SETFL, O_NONBLOCK);
}

ChildProcess::~ChildProcess() {
  if (running_) end();
  close_pipes();
}

void ChildProcess::close_pipes() {
  for (int* fd : {&out_fd_, &err_fd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

void ChildProcess::read_available(int fd, std::string& into) {
  std::array<char, 16384> chunk{};
  for (;;) {
    const auto got = read(fd, chunk.data(), chunk.size());
    if (got <= 0) return;
    const auto room = output_cap - std::min(output_cap, into.size());
    into.append(chunk.data(), std::min(room, static_cast<std::size_t>(got)));
  }
}

bool ChildProcess::reap(int flags) {
  int status = 0;
  const pid_t done = waitpid(pid_, &status, flags);
  if (done != pid_) return false;
  running_ = false;
  outcome_.seconds = elapsed_ms(started_at_) / 1000.0;
  if (WIFEXITED(status)) outcome_.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) outcome_.signal = WTERMSIG(status);
  return true;
}

bool ChildProcess::pump(Clock::time_point until, int stop_fd) {
  while (running_) {
    std::array<pollfd, 3> fds{pollfd{.fd = out_fd_, .events = POLLIN, .revents = 0},
                              pollfd{.fd = err_fd_, .events = POLLIN, .revents = 0},
                              pollfd{.fd = stop_fd, .events = POLLIN, .revents = 0}};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    const auto wait = std::max(std::chrono::milliseconds(0), std::min(left, std::chrono::milliseconds(slice)));
    poll(fds.data(), stop_fd >= 0 ? 3 : 2, static_cast<int>(wait.count()));
    read_available(out_fd_, outcome_.out);
    read_available(err_fd_, outcome_.err);
    if (stop_fd >= 0 && (fds[2].revents & POLLIN) != 0) {
      outcome_.interrupted = true;
      return running_;
    }
    if (reap(WNOHANG)) break;
    if (Clock::now() >= until) return running_;
  }
  // What it wrote just before it ended.
  read_available(out_fd_, outcome_.out);
  read_available(err_fd_, outcome_.err);
  return false;
}

ChildOutcome ChildProcess::finish(Clock::time_point deadline, int stop_fd) {
  if (!started()) return outcome_;
  pump(deadline, stop_fd);
  if (running_) {
    outcome_.timed_out = !outcome_.interrupted;
    return end();
  }
  return outcome_;
}

ChildOutcome ChildProcess::end() {
  if (running_) {
    kill(pid_, SIGTERM);
    // Its partial report comes on SIGTERM; SIGKILL only when it does not end in the grace.
    const auto deadline = Clock::now() + grace;
    while (running_ && Clock::now() < deadline) pump(std::min(deadline, Clock::now() + slice), -1);
    if (running_) {
      kill(pid_, SIGKILL);
      // A process stuck in the kernel (a cm_id torn down on a dead port) may take a while
      // even to die: wait a bounded time, then leave it and say so.
      const auto killed_by = Clock::now() + std::chrono::seconds(10);
      while (!reap(WNOHANG) && Clock::now() < killed_by) std::this_thread::sleep_for(slice);
      if (running_) {
        running_ = false;
        outcome_.signal = SIGKILL;
        outcome_.start_error = "did not end within 10 s of SIGKILL (stuck in the kernel); left behind";
      }
    }
    read_available(out_fd_, outcome_.out);
    read_available(err_fd_, outcome_.err);
  }
  return outcome_;
}

}  // namespace rdmakit
