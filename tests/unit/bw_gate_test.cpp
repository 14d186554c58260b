// send_bw's CI gate without a device: rows against fixed limits and against a baseline
// report read from a file, and the baseline files it refuses.

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "lib/base/error.hpp"
#include "lib/base/stats_json.hpp"
#include "lib/send_bw/bw_gate.hpp"

namespace rdmakit {
namespace {

BandwidthRow bandwidth_row(std::uint32_t size, double mib_per_s, double mpps) {
  BandwidthRow row;
  row.size = size;
  row.iterations = 1000;
  row.average_mib_per_s = mib_per_s;
  row.message_rate_mpps = mpps;
  return row;
}

LatencyRow latency_row(std::uint32_t size, double median_us, double p99_us) {
  LatencyRow row;
  row.size = size;
  row.summary.count = 1000;
  row.summary.p50_us = median_us;
  row.summary.p99_us = p99_us;
  return row;
}

// A file under the test's temporary folder holding `text`; removed with the object.
class TempFile {
 public:
  explicit TempFile(const std::string& text)
      : path_(::testing::TempDir() + "bw_gate_" + std::to_string(++count_) + ".json") {
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  static inline int count_ = 0;
  std::string path_;
};

// A client's report holding `rows`, as send_bw writes them.
std::string report_of(const char* test, const char* operation, const nlohmann::json& rows) {
  return nlohmann::json{{"tool", "send_bw"}, {"test", {{"test", test}, {"operation", operation}}}, {"rows", rows}}
      .dump();
}

std::string bandwidth_baseline() {
  return report_of("bw", "send",
                   {to_json(bandwidth_row(4096, 100.0, 0.0256)), to_json(bandwidth_row(65536, 400.0, 0.0064))});
}

TEST(BwGate, FixedLimitsNameTheRowTheFigureAndTheLimit) {
  BwResults results;
  results.bandwidth = {bandwidth_row(4096, 90, 0.023), bandwidth_row(65536, 410, 0.0066)};
  const RowLimits limits{.min_bw_mib_per_s = 100, .min_rate_mpps = 0.02, .max_lat_p99_us = std::nullopt};
  const auto gate = check_rows(results, limits, std::nullopt, 0.1);
  ASSERT_EQ(gate.shortfalls.size(), 2u);  // 4096 B below 100 MiB/s; 65536 B below 0.02 Mpps
  EXPECT_EQ(gate.shortfalls[0].bytes, 4096u);
  EXPECT_EQ(gate.shortfalls[0].figure, "bw_average_mib_per_s");
  EXPECT_EQ(gate.shortfalls[0].by, "--expect-bw");
  EXPECT_EQ(gate.shortfalls[1].figure, "message_rate_mpps");
  EXPECT_EQ(gate.summary(), "4096 B: bw_average_mib_per_s 90 below 100 (--expect-bw) (and 1 more)");
  nlohmann::json document;
  gate.add_to(document);
  EXPECT_FALSE(document["gate"]["passed"].get<bool>());
  EXPECT_EQ(document["gate"]["expect"]["bw_average_mib_per_s"], 100.0);
  EXPECT_TRUE(document["gate"]["baseline"].is_null());

  const auto passing =
      check_rows(results, {.min_bw_mib_per_s = 50, .min_rate_mpps = {}, .max_lat_p99_us = {}}, std::nullopt, 0.1);
  EXPECT_TRUE(passing.passed());
  EXPECT_EQ(passing.text(), "gate: passed\n");
}

TEST(BwGate, LatencyAboveItsP99LimitFails) {
  BwResults results;
  results.latency = {latency_row(64, 8, 25), latency_row(4096, 12, 40)};
  const auto gate =
      check_rows(results, {.min_bw_mib_per_s = {}, .min_rate_mpps = {}, .max_lat_p99_us = 30}, std::nullopt, 0.1);
  ASSERT_EQ(gate.shortfalls.size(), 1u);
  EXPECT_EQ(gate.summary(), "4096 B: t_p99_us 40 above 30 (--expect-lat-p99)");
}

TEST(BwGate, TheBaselineFlagsRegressionsBeyondTheTolerance) {
  const TempFile file(bandwidth_baseline());
  const auto baseline = read_baseline(file.path());
  BwResults results;
  // 4096 B: 10% down is within 0.15; 65536 B: 30% down is not; 1 MiB: no row there.
  results.bandwidth = {bandwidth_row(4096, 90, 0.023), bandwidth_row(65536, 280, 0.0045),
                       bandwidth_row(1 << 20, 500, 0.0005)};
  const auto gate = check_rows(results, {}, baseline, 0.15);
  EXPECT_EQ(gate.rows_compared, 2u);
  EXPECT_EQ(gate.rows_unmatched, (std::vector<std::uint32_t>{1 << 20}));
  ASSERT_EQ(gate.shortfalls.size(), 1u);
  EXPECT_EQ(gate.shortfalls[0].bytes, 65536u);
  EXPECT_DOUBLE_EQ(gate.shortfalls[0].limit, 340);
  EXPECT_EQ(gate.summary(), "65536 B: bw_average_mib_per_s 280 below 340 (the baseline's 400 less 15%)");
  // A faster run passes whatever the tolerance.
  results.bandwidth = {bandwidth_row(4096, 200, 0.05), bandwidth_row(65536, 800, 0.0128)};
  EXPECT_TRUE(check_rows(results, {}, baseline, 0).passed());
}

TEST(BwGate, LatencyBaselineComparesTheMedianAndP99) {
  const TempFile file(report_of("lat", "write", nlohmann::json::array({to_json(latency_row(64, 10.0, 20.0))})));
  const auto baseline = read_baseline(file.path());
  EXPECT_NO_THROW(check_baseline_matches(baseline, bw::Test::latency, bw::Operation::write));
  EXPECT_THROW(check_baseline_matches(baseline, bw::Test::latency, bw::Operation::send), UsageError);
  EXPECT_THROW(check_baseline_matches(baseline, bw::Test::bandwidth, bw::Operation::write), UsageError);
  BwResults results;
  results.latency = {latency_row(64, 12, 21)};
  const auto gate = check_rows(results, {}, baseline, 0.1);
  ASSERT_EQ(gate.shortfalls.size(), 1u);
  EXPECT_EQ(gate.shortfalls[0].figure, "t_median_us");
  EXPECT_EQ(gate.shortfalls[0].baseline, 10);
}

TEST(BwGate, BadBaselineFilesAreUsageErrors) {
  EXPECT_THROW(read_baseline("/nonexistent/old.json"), UsageError);
  for (
      const auto* text : {
          "not json",
          "[1, 2]",
          R"({"tool": "rping", "rows": []})",
          R"({"tool": "send_bw", "test": {"test": "bw", "operation": "send"}, "rows": []})",
          R"({"tool": "send_bw", "rows": [{"bytes": 64, "bw_average_mib_per_s": 1}]})",
          R"({"tool": "send_bw", "test": {"test": "bw", "operation": "send"}, "rows": [{"bytes": 64}]})",
          R"({"tool": "send_bw", "test": {"test": "bw", "operation": "send"}, "rows": [{"bytes": -1, "bw_average_mib_per_s": 1}]})",
          R"({"tool": "send_bw", "test": {"test": "lat", "operation": "send"}, "rows": [{"bytes": 64, "t_median_us": 1}]})",
      }) {
    const TempFile file(text);
    EXPECT_THROW(read_baseline(file.path()), UsageError) << text;
  }
}

// A row is read as strictly as send_bw writes it: every figure present, of its type and range.
TEST(BwGate, ABaselineRowIsReadStrictly) {
  auto row = to_json(bandwidth_row(4096, 100.0, 0.0256));
  row["bytes"] = 1ULL << 33;
  const TempFile file(report_of("bw", "send", {to_json(bandwidth_row(64, 1, 1)), row}));
  try {
    read_baseline(file.path());
    ADD_FAILURE() << "read";
  } catch (const UsageError& error) {
    EXPECT_EQ(std::string(error.what()),
              "--baseline: " + file.path() + " is not a send_bw report: rows[1].bytes: 8589934592 is out of range");
  }
}

}  // namespace
}  // namespace rdmakit
