#pragma once
// send_bw as a CI gate: each row held against fixed limits (--expect-bw, --expect-rate,
// --expect-lat-p99) and against an earlier run's report (--baseline, --tolerance). Pure:
// the rows in, the shortfalls out, so the unit tests check it without a device.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/described_json.hpp"
#include "lib/base/report.hpp"
#include "lib/send_bw/send_bw_session.hpp"

namespace rdmakit {

struct RowLimits {
  std::optional<double> min_bw_mib_per_s;  // --expect-bw: each bandwidth row's average
  std::optional<double> min_rate_mpps;     // --expect-rate: each bandwidth row's message rate
  std::optional<double> max_lat_p99_us;    // --expect-lat-p99: each latency row's p99
  bool any() const { return min_bw_mib_per_s || min_rate_mpps || max_lat_p99_us; }
};

// An earlier send_bw client's report, as --baseline reads it: its test and its rows.
struct Baseline {
  std::string file;
  std::string test;       // "bw" or "lat"
  std::string operation;  // "send", "write", "read"
  // Its rows, read strictly (lib/base/stats_json.hpp): a bandwidth test's or a latency test's.
  std::vector<BandwidthRow> bandwidth;
  std::vector<LatencyRow> latency;
};

// Reads and checks FILE; throws UsageError saying what is wrong with it (not a send_bw
// client's report, no rows, a row that is not one send_bw writes).
Baseline read_baseline(const std::string& file);
// The baseline's test must be this run's: throws UsageError naming both otherwise.
void check_baseline_matches(const Baseline& baseline, bw::Test test, bw::Operation operation);

// One figure of one row that fell short.
struct Shortfall {
  std::uint32_t bytes = 0;
  std::string figure;  // the row's JSON name: bw_average_mib_per_s, message_rate_mpps, t_p99_us, t_median_us
  double measured = 0;
  double limit = 0;                // the bound it missed: the flag's value, or the baseline's scaled by the tolerance
  std::string by;                  // --expect-bw, --expect-rate, --expect-lat-p99 or --baseline
  std::optional<double> baseline;  // --baseline: the baseline's figure
};

struct GateResult final : ReportSection {
  RowLimits limits;
  std::optional<Baseline> baseline;
  double tolerance = 0.1;
  std::size_t rows_compared = 0;              // rows with a baseline row of the same size
  std::vector<std::uint32_t> rows_unmatched;  // sizes the baseline has no row for
  std::vector<Shortfall> shortfalls;

  bool passed() const { return shortfalls.empty(); }
  // The one line a failing run exits with: the first shortfall, and how many more.
  std::string summary() const;
  void add_to(nlohmann::json& document) const override;
  std::string text() const override;
};

// Holds every row of `results` against the limits and the baseline (within `tolerance`, a
// fraction: 0.1 lets bandwidth fall and latency rise by 10%).
GateResult check_rows(const BwResults& results, const RowLimits& limits, const std::optional<Baseline>& baseline,
                      double tolerance);

// The "gate" section's shape and its schema definition (tests/unit/described_json_test.cpp).
std::vector<described::SchemaShape> gate_json_shapes();

}  // namespace rdmakit
