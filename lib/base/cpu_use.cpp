#include "lib/base/cpu_use.hpp"

#include <sys/resource.h>

#include <tuple>
#include <utility>

namespace rdmakit {

namespace {

double seconds(const timeval& time) {
  return static_cast<double>(time.tv_sec) + static_cast<double>(time.tv_usec) / 1e6;
}

// This process's user and system CPU seconds so far (every thread).
std::pair<double, double> process_cpu() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return {seconds(usage.ru_utime), seconds(usage.ru_stime)};
}

}  // namespace

CpuClock::CpuClock() : started_(std::chrono::steady_clock::now()) {
  std::tie(user_s_, system_s_) = process_cpu();
}

CpuUse CpuClock::used() const {
  const auto [user, system] = process_cpu();
  return {.user_s = user - user_s_,
          .system_s = system - system_s_,
          .wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count()};
}

}  // namespace rdmakit
