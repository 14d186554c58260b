#include <gtest/gtest.h>

#include <cmath>

#include "lib/base/stats.hpp"

using namespace std::chrono_literals;

namespace rdmakit {
namespace {

TEST(Percentile, NearestRankOnHandComputedVector) {
  // 1..10: p50 is the 5th value, p90 the 9th, p99 and p99.9 the 10th.
  const std::vector<double> v{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 50), 5);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 90), 9);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 91), 10);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 99), 10);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 99.9), 10);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 100), 10);
}

TEST(Percentile, ThousandSamples) {
  std::vector<double> v;
  for (int i = 1; i <= 1000; ++i) {
    v.push_back(i);
  }
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 50), 500);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 99), 990);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 99.9), 999);
}

TEST(Percentile, RejectsEmptyAndOutOfRange) {
  EXPECT_THROW(percentile_sorted({}, 50), std::invalid_argument);
  EXPECT_THROW(percentile_sorted({1.0}, 101), std::invalid_argument);
  EXPECT_THROW(percentile_sorted({1.0}, -1), std::invalid_argument);
}

TEST(LatencyRecorder, SummaryOfUnsortedSamples) {
  LatencyRecorder r;
  EXPECT_FALSE(r.summary().has_value());
  for (auto ns : {5000ns, 1000ns, 3000ns, 2000ns, 4000ns}) {
    r.add(ns);
  }
  const auto s = r.summary().value();
  EXPECT_EQ(s.count, 5u);
  EXPECT_DOUBLE_EQ(s.min_us, 1.0);
  EXPECT_DOUBLE_EQ(s.max_us, 5.0);
  EXPECT_DOUBLE_EQ(s.avg_us, 3.0);
  EXPECT_DOUBLE_EQ(s.p50_us, 3.0);
  EXPECT_DOUBLE_EQ(s.p99_us, 5.0);
  EXPECT_DOUBLE_EQ(s.stdev_us, std::sqrt(2.0));  // population: mean of squared deviations 4+1+0+1+4 over 5
}

TEST(Throughput, BytesAndMessagesPerSecond) {
  const auto t = throughput(1'000'000'000, 1000, 2s);
  EXPECT_DOUBLE_EQ(t.megabytes_per_s, 500.0);
  EXPECT_DOUBLE_EQ(t.gigabits_per_s, 4.0);
  EXPECT_DOUBLE_EQ(t.messages_per_s, 500.0);
  const auto zero = throughput(100, 1, 0s);
  EXPECT_DOUBLE_EQ(zero.megabytes_per_s, 0.0);
}

TEST(StepTable, OverlappingSpansGiveWallTimeAndPerConnectionCost) {
  const auto t0 = std::chrono::steady_clock::time_point{};
  // Two connections resolve at once (0-10 ms and 2-6 ms), then connect one after another.
  const std::vector<StepSpan> spans{
      {Step::resolve_addr, t0, t0 + 10ms},
      {Step::resolve_addr, t0 + 2ms, t0 + 6ms},
      {Step::connect, t0 + 10ms, t0 + 13ms},
      {Step::connect, t0 + 13ms, t0 + 14ms},
  };
  const auto rows = step_table(spans);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].step, Step::resolve_addr);
  EXPECT_EQ(rows[0].spans, 2u);
  EXPECT_DOUBLE_EQ(rows[0].wall_ms, 10.0);
  EXPECT_DOUBLE_EQ(rows[0].max_ms, 10.0);
  EXPECT_DOUBLE_EQ(rows[0].min_ms, 4.0);
  EXPECT_DOUBLE_EQ(rows[0].avg_ms, 7.0);
  EXPECT_DOUBLE_EQ(rows[0].per_connection_us, 5000.0);
  EXPECT_EQ(rows[1].step, Step::connect);
  EXPECT_DOUBLE_EQ(rows[1].wall_ms, 4.0);
  EXPECT_DOUBLE_EQ(rows[1].min_ms, 1.0);
  EXPECT_DOUBLE_EQ(rows[1].per_connection_us, 2000.0);
}

TEST(StepTable, CountsTheSpansThatFailed) {
  const auto t0 = std::chrono::steady_clock::time_point{};
  const std::vector<StepSpan> spans{
      {Step::connect, t0, t0 + 3ms},
      {Step::connect, t0, t0 + 9ms, true},
      {Step::connect, t0 + 1ms, t0 + 4ms},
      {Step::transfer, t0 + 9ms, t0 + 12ms},
  };
  const auto rows = step_table(spans);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].spans, 3u);
  EXPECT_EQ(rows[0].failed, 1u);
  EXPECT_DOUBLE_EQ(rows[0].max_ms, 9.0);  // a failed span took its time too
  EXPECT_EQ(rows[1].failed, 0u);
}

TEST(StepTable, EmptyInputGivesNoRows) {
  EXPECT_TRUE(step_table({}).empty());
}

TEST(BandwidthRow, AverageIsBytesOverTimeAndPeakNeverBelowIt) {
  // 1000 messages of 64 KiB in 0.5 s: 125 MiB/s, 1.048576 Gbit/s, 0.002 Mpps.
  const auto row = bandwidth_row(65536, 1000, 500ms, 10ms, 64);
  EXPECT_EQ(row.bytes, 65536000u);
  EXPECT_DOUBLE_EQ(row.seconds, 0.5);
  EXPECT_DOUBLE_EQ(row.average_mib_per_s, 125.0);
  EXPECT_DOUBLE_EQ(row.average_gbit_per_s, 1.048576);
  EXPECT_DOUBLE_EQ(row.message_rate_mpps, 0.002);
  EXPECT_DOUBLE_EQ(row.peak_mib_per_s, 64 * 65536 / 0.01 / 1048576.0);
  // A slow interval never drags the peak under the average; no interval at all gives the average.
  EXPECT_DOUBLE_EQ(bandwidth_row(65536, 1000, 500ms, 1s, 64).peak_mib_per_s, row.average_mib_per_s);
  EXPECT_DOUBLE_EQ(bandwidth_row(65536, 1000, 500ms, 0ns, 0).peak_mib_per_s, row.average_mib_per_s);
}

}  // namespace
}  // namespace rdmakit

TEST(LatencyRecorder, ReservesAMillionSamplesAtMost) {
  rdmakit::LatencyRecorder recorder;
  recorder.reserve(2'000'000'000);  // rdma_client -C 2000000000 once failed here with bad_alloc
  EXPECT_GE(recorder.capacity(), std::size_t{1} << 20);
  EXPECT_LT(recorder.capacity(), std::size_t{1} << 22);
  recorder.add(std::chrono::microseconds(5));
  EXPECT_EQ(recorder.count(), 1u);
}

TEST(LatencyRecorder, PastTheExactLimitKeepsBoundedMemoryAndClosePercentiles) {
  constexpr std::uint64_t n = 100'000;
  rdmakit::LatencyRecorder recorder(1000);
  // 1..n ns in a scrambled order (7919 is prime, so i * 7919 mod n visits every residue).
  for (std::uint64_t i = 0; i < n; ++i) recorder.add(std::chrono::nanoseconds((i * 7919) % n + 1));
  EXPECT_FALSE(recorder.exact());
  EXPECT_EQ(recorder.capacity(), 0u);
  const auto s = recorder.summary().value();
  EXPECT_EQ(s.count, n);
  EXPECT_DOUBLE_EQ(s.min_us, 0.001);
  EXPECT_DOUBLE_EQ(s.max_us, 100.0);
  EXPECT_NEAR(s.avg_us, 50.0005, 1e-9);
  EXPECT_NEAR(s.stdev_us, std::sqrt((static_cast<double>(n) * n - 1) / 12.0) / 1000.0, 1e-9);  // uniform 1..n
  EXPECT_NEAR(s.p50_us, 50.0, 50.0 / 256);
  EXPECT_NEAR(s.p99_us, 99.0, 99.0 / 256);
  EXPECT_NEAR(s.p999_us, 99.9, 99.9 / 256);
}

TEST(LatencyRecorder, HistogramTakesTheWholeRangeOfDurations) {
  rdmakit::LatencyRecorder recorder(0);        // every sample goes to the histogram
  recorder.add(std::chrono::nanoseconds(-5));  // a clock step backwards: counted as zero
  recorder.add(std::chrono::nanoseconds(127));
  recorder.add(std::chrono::nanoseconds(128));
  recorder.add(std::chrono::hours(24 * 365));
  const auto s = recorder.summary().value();
  EXPECT_EQ(s.count, 4u);
  EXPECT_DOUBLE_EQ(s.min_us, -0.005);
  EXPECT_DOUBLE_EQ(s.p50_us, 0.127);      // buckets below 128 ns are exact
  EXPECT_DOUBLE_EQ(s.p999_us, s.max_us);  // clamped to the largest sample seen
  EXPECT_NEAR(s.p99_us, s.max_us, s.max_us / 256);
}

namespace rdmakit {
namespace {

std::uint64_t total(const std::vector<HistogramBucket>& buckets) {
  std::uint64_t sum = 0;
  for (const auto& b : buckets) sum += b.count;
  return sum;
}

TEST(LatencyHistogram, BucketsAreLogLinearAndHoldEverySample) {
  LatencyRecorder recorder;
  for (int i = 0; i < 100; ++i) recorder.add(std::chrono::nanoseconds(5));     // below 8 ns: a bucket a ns
  for (int i = 0; i < 50; ++i) recorder.add(std::chrono::nanoseconds(10000));  // 10 us
  recorder.add(std::chrono::nanoseconds(1000000));                             // 1 ms
  const auto buckets = recorder.histogram();
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(total(buckets), 151u);
  EXPECT_DOUBLE_EQ(buckets[0].low_us, 0.005);
  EXPECT_DOUBLE_EQ(buckets[0].high_us, 0.006);
  EXPECT_EQ(buckets[0].count, 100u);
  // 10000 ns lies in [9216, 10240): 2^13 split in 8 buckets of 1024 ns.
  EXPECT_DOUBLE_EQ(buckets[1].low_us, 9.216);
  EXPECT_DOUBLE_EQ(buckets[1].high_us, 10.24);
  EXPECT_EQ(buckets[1].count, 50u);
  EXPECT_LE(buckets[2].low_us, 1000.0);
  EXPECT_GT(buckets[2].high_us, 1000.0);
  EXPECT_TRUE(LatencyRecorder().histogram().empty());
}

TEST(LatencyHistogram, TheSameBucketsOnceTheSamplesLiveInTheRecordersHistogram) {
  LatencyRecorder exact;
  LatencyRecorder bounded(16);  // past 16 samples, its own fine histogram
  for (int i = 1; i <= 1000; ++i) {
    exact.add(std::chrono::nanoseconds(i * 37));
    bounded.add(std::chrono::nanoseconds(i * 37));
  }
  ASSERT_FALSE(bounded.exact());
  const auto a = exact.histogram();
  const auto b = bounded.histogram();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_DOUBLE_EQ(a[i].low_us, b[i].low_us);
    EXPECT_EQ(a[i].count, b[i].count) << a[i].low_us;
  }
}

}  // namespace
}  // namespace rdmakit
