// lib/send_bw/tick_clock: ticks become the time steady_clock saw pass.

#include <gtest/gtest.h>

#include <thread>

#include "lib/send_bw/tick_clock.hpp"

namespace rdmakit {
namespace {

TEST(TickClock, CalibratedTicksMeasureWallTime) {
  TickCalibration calibration;
  calibration.finish(std::chrono::milliseconds(20));
  EXPECT_GT(calibration.nanoseconds_per_tick(), 0.0);
  const auto wall_start = Clock::now();
  const auto start = ticks_now();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto ticks = ticks_now() - start;
  const auto wall = Clock::now() - wall_start;
  const auto measured = calibration.duration(ticks);
  // The same stretch both ways, within 5% (a busy host may delay either read a little).
  const auto wall_ns = static_cast<double>(wall.count());
  EXPECT_NEAR(static_cast<double>(measured.count()), wall_ns, 0.05 * wall_ns);
  // And back: a duration in ticks.
  const auto tick_count = static_cast<double>(ticks);
  EXPECT_NEAR(static_cast<double>(calibration.ticks(measured)), tick_count, 0.001 * tick_count + 1);
}

TEST(TickClock, FinishWaitsForItsStretch) {
  const auto started = Clock::now();
  TickCalibration calibration;
  calibration.finish(std::chrono::milliseconds(5));
  EXPECT_GE(Clock::now() - started, std::chrono::milliseconds(5));
}

}  // namespace
}  // namespace rdmakit
