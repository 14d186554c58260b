#include "lib/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace rdmakit {

double percentile_sorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) {
    throw std::invalid_argument("percentile of an empty sample");
  }
  if (!(p >= 0.0 && p <= 100.0)) {
    throw std::invalid_argument("percentile outside [0, 100]");
  }
  const auto n = static_cast<double>(sorted.size());
  // p * n first: p / 100 is inexact for p = 99.9 and would push the rank one too high.
  const auto rank = static_cast<std::size_t>(std::ceil(p * n / 100.0 - 1e-9));
  return sorted[rank == 0 ? 0 : rank - 1];
}

void LatencyRecorder::add(std::chrono::nanoseconds sample) {
  samples_us_.push_back(static_cast<double>(sample.count()) / 1000.0);
}

std::optional<LatencySummary> LatencyRecorder::summary() const {
  if (samples_us_.empty()) {
    return std::nullopt;
  }
  std::vector<double> sorted = samples_us_;
  std::sort(sorted.begin(), sorted.end());
  LatencySummary s;
  s.count = sorted.size();
  s.min_us = sorted.front();
  s.max_us = sorted.back();
  s.avg_us = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(sorted.size());
  s.p50_us = percentile_sorted(sorted, 50.0);
  s.p99_us = percentile_sorted(sorted, 99.0);
  s.p999_us = percentile_sorted(sorted, 99.9);
  return s;
}

Throughput throughput(std::uint64_t bytes, std::uint64_t messages, std::chrono::nanoseconds elapsed) {
  Throughput t;
  if (elapsed.count() <= 0) {
    return t;
  }
  const double seconds = static_cast<double>(elapsed.count()) / 1e9;
  t.megabytes_per_s = static_cast<double>(bytes) / seconds / 1e6;
  t.gigabits_per_s = static_cast<double>(bytes) * 8.0 / seconds / 1e9;
  t.messages_per_s = static_cast<double>(messages) / seconds;
  return t;
}

}  // namespace rdmakit
