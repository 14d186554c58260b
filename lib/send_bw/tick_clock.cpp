#include "lib/send_bw/tick_clock.hpp"

#include <cmath>

namespace rdmakit {

TickCalibration::TickCalibration() : wall_start_(Clock::now()), ticks_start_(ticks_now()) {}

void TickCalibration::finish(std::chrono::nanoseconds at_least) {
  auto wall = Clock::now();
  while (wall - wall_start_ < at_least) wall = Clock::now();
  const auto ticks = ticks_now() - ticks_start_;
  const auto nanoseconds = std::chrono::duration<double, std::nano>(wall - wall_start_).count();
  // A counter that did not move (or a clock that did not) leaves the rate it had.
  if (ticks > 0 && nanoseconds > 0 && std::isfinite(nanoseconds / static_cast<double>(ticks))) {
    ns_per_tick_ = nanoseconds / static_cast<double>(ticks);
  }
}

std::chrono::nanoseconds TickCalibration::duration(std::uint64_t ticks) const {
  return std::chrono::nanoseconds(std::llround(static_cast<double>(ticks) * ns_per_tick_));
}

std::uint64_t TickCalibration::ticks(std::chrono::nanoseconds duration) const {
  return static_cast<std::uint64_t>(std::llround(static_cast<double>(duration.count()) / ns_per_tick_));
}

}  // namespace rdmakit
