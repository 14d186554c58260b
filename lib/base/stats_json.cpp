#include "lib/base/stats_json.hpp"

namespace rdmakit {

namespace {

using described::Describes;

struct StatsJson {
  // A sweep (-a) has 23 rows; a report with thousands is no send_bw report.
  static constexpr described::ReadLimits limits{.max_text_bytes = 1024, .max_list_entries = 4096};
  static constexpr auto missing_keys = described::MissingKeys::refused;

  static void members(Describes<LatencySummary> auto& summary, auto&& visit) {
    visit("count", summary.count);
    visit("min", summary.min_us);
    visit("avg", summary.avg_us);
    visit("stdev", summary.stdev_us);
    visit("p50", summary.p50_us);
    visit("p99", summary.p99_us);
    visit("p99.9", summary.p999_us);
    visit("max", summary.max_us);
  }

  static void members(Describes<BandwidthRow> auto& row, auto&& visit) {
    visit("bytes", row.size);
    visit("iterations", row.iterations);
    visit("seconds", row.seconds);
    visit("bw_peak_mib_per_s", row.peak_mib_per_s);
    visit("bw_average_mib_per_s", row.average_mib_per_s);
    visit("bw_average_gbit_per_s", row.average_gbit_per_s);
    visit("message_rate_mpps", row.message_rate_mpps);
  }

  // Send and write report half the round trip, read the whole read, as perftest does.
  static void members(Describes<LatencyRow> auto& row, auto&& visit) {
    visit("bytes", row.size);
    visit("iterations", row.summary.count);
    visit("t_min_us", row.summary.min_us);
    visit("t_max_us", row.summary.max_us);
    visit("t_median_us", row.summary.p50_us);
    visit("t_avg_us", row.summary.avg_us);
    visit("t_stdev_us", row.summary.stdev_us);
    visit("t_p99_us", row.summary.p99_us);
    visit("t_p999_us", row.summary.p999_us);
    visit("histogram", row.histogram, described::when_set);  // --histogram
  }

  static void members(Describes<HistogramBucket> auto& bucket, auto&& visit) {
    visit("low_us", bucket.low_us);
    visit("high_us", bucket.high_us);
    visit("count", bucket.count);
  }
};

// The keys send_bw writes beside a row's described ones (lib/send_bw/bw_json).
std::vector<std::string> row_extras() {
  return {"counters", "cpu", "datagrams"};
}

}  // namespace

nlohmann::json to_json(const LatencySummary& summary) {
  return described::write<StatsJson>(summary);
}

nlohmann::json to_json(const BandwidthRow& row) {
  return described::write<StatsJson>(row);
}

nlohmann::json to_json(const LatencyRow& row) {
  return described::write<StatsJson>(row);
}

LatencySummary latency_summary_from_json(const nlohmann::json& summary, const std::string& path) {
  return described::read_document<StatsJson, LatencySummary>(summary, path);
}

std::vector<BandwidthRow> bandwidth_rows_from_json(const nlohmann::json& rows) {
  return described::read_document<StatsJson, std::vector<BandwidthRow>>(rows, "rows");
}

std::vector<LatencyRow> latency_rows_from_json(const nlohmann::json& rows) {
  return described::read_document<StatsJson, std::vector<LatencyRow>>(rows, "rows");
}

std::vector<described::SchemaShape> stats_json_shapes() {
  return {{.schema = "common",
           .pointer = "/$defs/latency_summary",
           .shape = described::shape<StatsJson, LatencySummary>(),
           .extra_keys = {}},
          {.schema = "send_bw",
           .pointer = "/$defs/bandwidth_row",
           .shape = described::shape<StatsJson, BandwidthRow>(),
           .extra_keys = row_extras()},
          {.schema = "send_bw",
           .pointer = "/$defs/latency_row",
           .shape = described::shape<StatsJson, LatencyRow>(),
           .extra_keys = row_extras()}};
}

}  // namespace rdmakit
