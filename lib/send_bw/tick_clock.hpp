#pragma once
// A cheap timestamp for latency samples. A sample reads the clock twice, and where the
// kernel's clocksource is not the TSC (HPET in a TCG guest, some VMs) clock_gettime is a
// system call: 1.3 us each in the rxe VM, several percent of a round trip. The x86
// time-stamp counter costs nanoseconds anywhere, and perftest times with it too. Ticks are
// the TSC on x86 and steady_clock's nanoseconds elsewhere; a TickCalibration turns them
// into time, measured against steady_clock over a stretch the caller chooses.

#include <chrono>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "lib/base/wait.hpp"

namespace rdmakit {

// Inline: a latency sample starts and ends with it.
inline std::uint64_t ticks_now() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
#endif
}

class TickCalibration {
 public:
  TickCalibration();  // reads both clocks
  // Fixes the rate over the time since construction, first waiting (spinning) until at
  // least `at_least` has passed: the two clocks' reads cost microseconds, so a short stretch
  // would leave the rate that much off.
  void finish(std::chrono::nanoseconds at_least);
  // Before finish(): nanoseconds for one tick as 1.
  std::chrono::nanoseconds duration(std::uint64_t ticks) const;
  std::uint64_t ticks(std::chrono::nanoseconds duration) const;
  double nanoseconds_per_tick() const noexcept { return ns_per_tick_; }

 private:
  Clock::time_point wall_start_;
  std::uint64_t ticks_start_;
  double ns_per_tick_ = 1.0;
};

}  // namespace rdmakit
