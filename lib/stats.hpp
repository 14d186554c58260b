#pragma once
// Latency and throughput statistics. Percentiles use the nearest-rank definition
// (the smallest sample with at least p% of samples at or below it), so every reported
// value is a latency that was actually observed.

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

namespace rdmakit {

struct LatencySummary {
  std::uint64_t count = 0;
  double min_us = 0;
  double avg_us = 0;
  double p50_us = 0;
  double p99_us = 0;
  double p999_us = 0;
  double max_us = 0;
};

// Nearest-rank percentile of an ascending-sorted, non-empty sample; p in [0, 100].
double percentile_sorted(const std::vector<double>& sorted, double p);

class LatencyRecorder {
 public:
  void reserve(std::size_t n) { samples_us_.reserve(n); }
  void add(std::chrono::nanoseconds sample);
  std::size_t count() const noexcept { return samples_us_.size(); }
  // Empty when nothing was recorded.
  std::optional<LatencySummary> summary() const;

 private:
  std::vector<double> samples_us_;
};

struct Throughput {
  double megabytes_per_s = 0;  // 10^6 bytes per second
  double gigabits_per_s = 0;   // 10^9 bits per second
  double messages_per_s = 0;
};

Throughput throughput(std::uint64_t bytes, std::uint64_t messages, std::chrono::nanoseconds elapsed);

}  // namespace rdmakit
