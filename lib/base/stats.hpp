#pragma once
// Latency and throughput statistics. Percentiles use the nearest-rank definition
// (the smallest sample with at least p% of samples at or below it), so every reported
// value is a latency that was actually observed (up to LatencyRecorder's exact limit).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/base/step.hpp"

namespace rdmakit {

struct LatencySummary {
  std::uint64_t count = 0;
  double min_us = 0;
  double avg_us = 0;
  double stdev_us = 0;  // population standard deviation
  double p50_us = 0;    // the median
  double p99_us = 0;
  double p999_us = 0;
  double max_us = 0;
};

// Nearest-rank percentile of an ascending-sorted, non-empty sample; p in [0, 100].
double percentile_sorted(const std::vector<double>& sorted, double p);

// One bar of a latency histogram: the samples in [low_us, high_us).
struct HistogramBucket {
  double low_us = 0;
  double high_us = 0;
  std::uint64_t count = 0;
};

class LatencyRecorder {
 public:
  static constexpr std::size_t default_exact_samples = std::size_t{1} << 20;

  // Keeps the first `exact_samples` samples one by one. Past that (rping -C 0 runs forever)
  // the samples move into a log-linear histogram of fixed size (about 58 KiB), so memory
  // stays bounded. Percentiles then carry at most 0.4% relative error; count, min, max,
  // avg and stdev stay exact.
  explicit LatencyRecorder(std::size_t exact_samples = default_exact_samples) : exact_samples_(exact_samples) {}
  // Room for `n` samples, never more than are kept one by one: a run asking for billions
  // (rdma_client -C 2000000000) must not fail its first allocation.
  void reserve(std::size_t n) { samples_us_.reserve(std::min(n, exact_samples_)); }
  void add(std::chrono::nanoseconds sample);
  std::uint64_t count() const noexcept { return count_; }
  std::size_t capacity() const noexcept { return samples_us_.capacity(); }
  // False once the samples live in the histogram.
  bool exact() const noexcept { return histogram_.empty(); }
  // Empty when nothing was recorded.
  std::optional<LatencySummary> summary() const;
  // The samples in log-linear buckets of nanoseconds: each power of two split into 8 (so a
  // bucket is at most 1/8 of its low bound wide), below 8 ns one a nanosecond. Only the
  // buckets with samples, ascending. Exact past the one-by-one part too, since the
  // recorder's own buckets nest in these.
  std::vector<HistogramBucket> histogram() const;

 private:
  void move_to_histogram();
  void add_to_histogram(std::uint64_t nanoseconds);
  LatencySummary histogram_summary() const;

  std::size_t exact_samples_;
  std::vector<double> samples_us_;
  std::vector<std::uint64_t> histogram_;  // counts per bucket of nanoseconds, see bucket_of
  std::uint64_t count_ = 0;
  double min_us_ = 0;
  double max_us_ = 0;
  double mean_us_ = 0;
  double squared_deviations_ = 0;  // Welford's running sum, for the stdev past the exact part
};

struct Throughput {
  double megabytes_per_s = 0;  // 10^6 bytes per second
  double gigabits_per_s = 0;   // 10^9 bits per second
  double messages_per_s = 0;
};

// Per-step timing across many connections, as rdma-core's cmtime prints it. Each
// connection contributes one span per step; a row gives the wall time from the first
// start to the last end (steps of different connections overlap), the slowest and the
// fastest connection, their mean, and the wall time divided by the number of spans.
struct StepRow {
  Step step = Step::connect;
  std::size_t spans = 0;
  std::size_t failed = 0;  // spans that ended in an error
  double wall_ms = 0;
  double max_ms = 0;
  double min_ms = 0;
  double avg_ms = 0;
  double per_connection_us = 0;  // wall_ms * 1000 / spans
};

// One row per step, in the order each step first appears in `spans`.
std::vector<StepRow> step_table(const std::vector<StepSpan>& spans);

// One bandwidth measurement (a row of send_bw's table). As in perftest, "MB" is 2^20 bytes
// (MiB) and "Gb" 10^9 bits. The peak is the best rate over one signalling interval (the messages between
// two consecutive signalled completions); the average covers first post to last completion.
struct BandwidthRow {
  std::uint32_t size = 0;
  std::uint64_t iterations = 0;
  std::uint64_t bytes = 0;
  double seconds = 0;
  double average_mib_per_s = 0;
  double peak_mib_per_s = 0;
  double average_gbit_per_s = 0;
  double message_rate_mpps = 0;  // millions of messages per second
};

// One message size's latency, as a latency test reports it.
struct LatencyRow {
  std::uint32_t size = 0;
  LatencySummary summary;
  std::vector<HistogramBucket> histogram;  // send_bw --histogram only
  std::uint64_t unanswered = 0;            // -c UD: pings whose answer did not come in time
};

// `fastest_interval` covered `interval_messages` messages; zero intervals mean no peak.
BandwidthRow bandwidth_row(std::uint32_t size, std::uint64_t iterations, std::chrono::nanoseconds elapsed,
                           std::chrono::nanoseconds fastest_interval, std::uint64_t interval_messages);

Throughput throughput(std::uint64_t bytes, std::uint64_t messages, std::chrono::nanoseconds elapsed);

}  // namespace rdmakit
