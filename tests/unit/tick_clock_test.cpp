// lib/send_bw/tick_clock: ticks become the time steady_clock saw pass.

#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "lib/send_bw/tick_clock.hpp"

namespace rdmakit {
namespace {

// One calibration and one 50 ms stretch measured both ways: the relative difference.
double calibrated_error() {
  TickCalibration calibration;
  calibration.finish(std::chrono::milliseconds(20));
  EXPECT_GT(calibration.nanoseconds_per_tick(), 0.0);
  const auto wall_start = Clock::now();
  const auto start = ticks_now();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto ticks = ticks_now() - start;
  const auto wall = Clock::now() - wall_start;
  const auto measured = calibration.duration(ticks);
  // And back: a duration in ticks.
  const auto tick_count = static_cast<double>(ticks);
  EXPECT_NEAR(static_cast<double>(calibration.ticks(measured)), tick_count, 0.001 * tick_count + 1);
  const auto wall_ns = static_cast<double>(wall.count());
  return std::abs(static_cast<double>(measured.count()) - wall_ns) / wall_ns;
}

// The same stretch both ways, within 5%. A busy host can preempt this thread between the
// tick and the clock reads of the calibration (CI's unit stage runs at nice 19 beside two
// guests: once 20% off), which says nothing of the clock: one of five tries must hold.
TEST(TickClock, CalibratedTicksMeasureWallTime) {
  std::vector<double> errors;
  for (int attempt = 0; attempt < 5; ++attempt) {
    errors.push_back(calibrated_error());
    if (errors.back() <= 0.05) return;
  }
  ADD_FAILURE() << "no calibration within 5% of the wall clock in 5 tries: " << ::testing::PrintToString(errors);
}

TEST(TickClock, FinishWaitsForItsStretch) {
  const auto started = Clock::now();
  TickCalibration calibration;
  calibration.finish(std::chrono::milliseconds(5));
  EXPECT_GE(Clock::now() - started, std::chrono::milliseconds(5));
}

}  // namespace
}  // namespace rdmakit
