#pragma once
// The CPU time this process spent over a stretch of wall time (getrusage), for the CPU
// cost of a measurement: a busy-polling loop shows near 100% of one core.

#include <chrono>
#include <cstdint>

namespace rdmakit {

struct CpuUse {
  double user_s = 0;
  double system_s = 0;
  double wall_s = 0;
  // (user + system) / wall: 1.0 is one core all the time; 0 when no wall time passed.
  double utilization() const { return wall_s > 0 ? (user_s + system_s) / wall_s : 0; }
  // CPU microseconds per message, 0 for no messages.
  double us_per_message(std::uint64_t messages) const {
    return messages > 0 ? (user_s + system_s) * 1e6 / static_cast<double>(messages) : 0;
  }
};

// Started at construction; used() is the CPU and wall time since.
class CpuClock {
 public:
  CpuClock();
  CpuUse used() const;

 private:
  double user_s_ = 0;
  double system_s_ = 0;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace rdmakit
