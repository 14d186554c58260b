#include "lib/base/stats.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <numeric>
#include <stdexcept>

namespace rdmakit {

namespace {

// Nearest rank (1-based) of percentile p among n samples.
std::uint64_t nearest_rank(double p, std::uint64_t n) {
  if (!(p >= 0.0 && p <= 100.0)) {
    throw std::invalid_argument("percentile outside [0, 100]");
  }
  // p * n first: p / 100 is inexact for p = 99.9 and would push the rank one too high.
  const auto rank = static_cast<std::uint64_t>(std::ceil(p * static_cast<double>(n) / 100.0 - 1e-9));
  return std::max<std::uint64_t>(rank, 1);
}

// Log-linear buckets of nanoseconds: values below 128 have a bucket each; above, every power
// of two is split into 128 buckets, so a bucket's midpoint is within 1/256 of its values.
constexpr unsigned sub_bucket_bits = 7;
constexpr std::uint64_t sub_buckets = std::uint64_t{1} << sub_bucket_bits;
constexpr std::size_t bucket_count = (64 - sub_bucket_bits + 1) * sub_buckets;

std::size_t bucket_of(std::uint64_t nanoseconds, unsigned bits = sub_bucket_bits) {
  const std::uint64_t per_octave = std::uint64_t{1} << bits;
  if (nanoseconds < per_octave) return nanoseconds;
  const auto shift = static_cast<unsigned>(std::bit_width(nanoseconds)) - 1 - bits;
  return ((shift + 1) << bits) + ((nanoseconds >> shift) - per_octave);
}

// The lowest value of `bucket` and the first value past it, in nanoseconds.
std::pair<std::uint64_t, std::uint64_t> bucket_bounds(std::size_t bucket, unsigned bits = sub_bucket_bits) {
  const std::uint64_t per_octave = std::uint64_t{1} << bits;
  if (bucket < per_octave) return {bucket, bucket + 1};
  const auto shift = static_cast<unsigned>(bucket >> bits) - 1;
  const auto low = ((bucket & (per_octave - 1)) + per_octave) << shift;
  return {low, low + (std::uint64_t{1} << shift)};
}

// The histogram's buckets: 8 a power of two.
constexpr unsigned shown_bucket_bits = 3;

double bucket_midpoint_us(std::size_t bucket) {
  const auto [low, high] = bucket_bounds(bucket);
  return (static_cast<double>(low) + static_cast<double>(high - low - 1) / 2.0) / 1000.0;
}

std::uint64_t to_nanoseconds(double microseconds) {
  return microseconds <= 0 ? 0 : static_cast<std::uint64_t>(std::llround(microseconds * 1000.0));
}

}  // namespace

double percentile_sorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) {
    throw std::invalid_argument("percentile of an empty sample");
  }
  return sorted[nearest_rank(p, sorted.size()) - 1];
}

void LatencyRecorder::add(std::chrono::nanoseconds sample) {
  const double us = static_cast<double>(sample.count()) / 1000.0;
  ++count_;
  if (count_ == 1) {
    min_us_ = max_us_ = us;
  } else {
    min_us_ = std::min(min_us_, us);
    max_us_ = std::max(max_us_, us);
  }
  const double deviation = us - mean_us_;
  mean_us_ += deviation / static_cast<double>(count_);
  squared_deviations_ += deviation * (us - mean_us_);
  if (!exact()) {
    add_to_histogram(sample.count() <= 0 ? 0 : static_cast<std::uint64_t>(sample.count()));
    return;
  }
  if (samples_us_.size() == exact_samples_) {
    move_to_histogram();
    add_to_histogram(to_nanoseconds(us));
    return;
  }
  samples_us_.push_back(us);
}

void LatencyRecorder::add_to_histogram(std::uint64_t nanoseconds) {
  ++histogram_[bucket_of(nanoseconds)];
}

void LatencyRecorder::move_to_histogram() {
  histogram_.assign(bucket_count, 0);
  for (const double us : samples_us_) add_to_histogram(to_nanoseconds(us));
  std::vector<double>().swap(samples_us_);  // give the memory back
}

LatencySummary LatencyRecorder::histogram_summary() const {
  LatencySummary s;
  s.count = count_;
  s.min_us = min_us_;
  s.max_us = max_us_;
  s.avg_us = mean_us_;
  s.stdev_us = std::sqrt(squared_deviations_ / static_cast<double>(count_));
  auto percentile = [&](double p) {
    const auto rank = nearest_rank(p, count_);
    std::uint64_t seen = 0;
    for (std::size_t bucket = 0; bucket < histogram_.size(); ++bucket) {
      seen += histogram_[bucket];
      if (seen >= rank) return std::clamp(bucket_midpoint_us(bucket), min_us_, max_us_);
    }
    return max_us_;
  };
  s.p50_us = percentile(50.0);
  s.p99_us = percentile(99.0);
  s.p999_us = percentile(99.9);
  return s;
}

std::vector<HistogramBucket> LatencyRecorder::histogram() const {
  std::map<std::size_t, std::uint64_t> counts;
  if (exact()) {
    for (const double us : samples_us_) ++counts[bucket_of(to_nanoseconds(us), shown_bucket_bits)];
  } else {
    for (std::size_t fine = 0; fine < histogram_.size(); ++fine) {
      if (histogram_[fine] != 0) counts[bucket_of(bucket_bounds(fine).first, shown_bucket_bits)] += histogram_[fine];
    }
  }
  std::vector<HistogramBucket> buckets;
  for (const auto& [bucket, count] : counts) {
    const auto [low, high] = bucket_bounds(bucket, shown_bucket_bits);
    buckets.push_back(
        {.low_us = static_cast<double>(low) / 1000.0, .high_us = static_cast<double>(high) / 1000.0, .count = count});
  }
  return buckets;
}

std::optional<LatencySummary> LatencyRecorder::summary() const {
  if (count_ == 0) {
    return std::nullopt;
  }
  if (!exact()) {
    return histogram_summary();
  }
  std::vector<double> sorted = samples_us_;
  std::sort(sorted.begin(), sorted.end());
  LatencySummary s;
  s.count = sorted.size();
  s.min_us = sorted.front();
  s.max_us = sorted.back();
  s.avg_us = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(sorted.size());
  double squares = 0;
  for (const double sample : sorted) {
    squares += (sample - s.avg_us) * (sample - s.avg_us);
  }
  s.stdev_us = std::sqrt(squares / static_cast<double>(sorted.size()));
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

std::vector<StepRow> step_table(const std::vector<StepSpan>& spans) {
  struct Accumulator {
    Step step;
    std::chrono::steady_clock::time_point first_start;
    std::chrono::steady_clock::time_point last_end;
    std::vector<double> durations_ms;
    std::size_t failed = 0;
  };
  std::vector<Accumulator> steps;
  for (const auto& span : spans) {
    auto found = std::find_if(steps.begin(), steps.end(), [&](const Accumulator& a) { return a.step == span.step; });
    if (found == steps.end()) {
      steps.push_back(Accumulator{span.step, span.started, span.ended, {}});
      found = steps.end() - 1;
    }
    found->first_start = std::min(found->first_start, span.started);
    found->last_end = std::max(found->last_end, span.ended);
    found->durations_ms.push_back(span.ms());
    found->failed += span.failed ? 1 : 0;
  }
  std::vector<StepRow> rows;
  rows.reserve(steps.size());
  for (const auto& a : steps) {
    StepRow row;
    row.step = a.step;
    row.spans = a.durations_ms.size();
    row.failed = a.failed;
    row.wall_ms = std::chrono::duration<double, std::milli>(a.last_end - a.first_start).count();
    const auto [min, max] = std::minmax_element(a.durations_ms.begin(), a.durations_ms.end());
    row.min_ms = *min;
    row.max_ms = *max;
    row.avg_ms = std::accumulate(a.durations_ms.begin(), a.durations_ms.end(), 0.0) / static_cast<double>(row.spans);
    row.per_connection_us = row.wall_ms * 1000.0 / static_cast<double>(row.spans);
    rows.push_back(row);
  }
  return rows;
}

namespace {
constexpr double mebibyte = 1024.0 * 1024.0;
}  // namespace

BandwidthRow bandwidth_row(std::uint32_t size, std::uint64_t iterations, std::chrono::nanoseconds elapsed,
                           std::chrono::nanoseconds fastest_interval, std::uint64_t interval_messages) {
  BandwidthRow row;
  row.size = size;
  row.iterations = iterations;
  row.bytes = std::uint64_t{size} * iterations;
  row.seconds = std::chrono::duration<double>(elapsed).count();
  if (row.seconds > 0) {
    row.average_mib_per_s = static_cast<double>(row.bytes) / row.seconds / mebibyte;
    row.average_gbit_per_s = static_cast<double>(row.bytes) * 8 / row.seconds / 1e9;
    row.message_rate_mpps = static_cast<double>(iterations) / row.seconds / 1e6;
  }
  const double interval_s = std::chrono::duration<double>(fastest_interval).count();
  row.peak_mib_per_s = interval_s > 0 && interval_messages > 0
                           ? static_cast<double>(interval_messages) * size / interval_s / mebibyte
                           : row.average_mib_per_s;
  row.peak_mib_per_s = std::max(row.peak_mib_per_s, row.average_mib_per_s);
  return row;
}

}  // namespace rdmakit
