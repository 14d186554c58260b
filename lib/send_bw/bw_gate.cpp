#include "lib/send_bw/bw_gate.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "lib/base/described_json.hpp"
#include "lib/base/error.hpp"
#include "lib/base/stats_json.hpp"

namespace rdmakit {

namespace {

using described::Describes;
using described::when_set;

// A report larger than this is no send_bw report (a sweep's is a few tens of KiB).
constexpr std::streamsize max_baseline_bytes = 64 << 20;

nlohmann::json parse_file(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw UsageError(fmt::format("--baseline: cannot read {}", file));
  std::ostringstream text;
  text << in.rdbuf();
  if (text.tellp() > max_baseline_bytes) throw UsageError(fmt::format("--baseline: {} is too large", file));
  auto document = nlohmann::json::parse(text.str(), nullptr, false);
  if (document.is_discarded() || !document.is_object()) {
    throw UsageError(fmt::format("--baseline: {} is not a JSON report (send_bw --json)", file));
  }
  return document;
}

std::string string_in(const nlohmann::json& object, const char* key) {
  const auto found = object.find(key);
  return found != object.end() && found->is_string() ? found->get<std::string>() : std::string();
}

// The report's rows, as the test that wrote them has them.
void read_rows(Baseline& baseline, const nlohmann::json& document) {
  const auto rows = document.value("rows", nlohmann::json());
  if (!rows.is_array() || rows.empty()) {
    throw UsageError(fmt::format("--baseline: {} has no rows (a send_bw client's report has them)", baseline.file));
  }
  try {
    if (baseline.test == "lat") {
      baseline.latency = latency_rows_from_json(rows);
    } else {
      baseline.bandwidth = bandwidth_rows_from_json(rows);
    }
  } catch (const ProtocolError& error) {
    throw UsageError(fmt::format("--baseline: {} is not a send_bw report: {}", baseline.file, error.what()));
  }
}

// The baseline's row of `bytes`, counted as compared; nullptr without a baseline or, counted
// as unmatched, when it has no such row.
template <typename Row>
const Row* matched_row(GateResult& gate, std::vector<Row> Baseline::*rows, std::uint32_t bytes) {
  if (!gate.baseline) return nullptr;
  for (const auto& row : (*gate.baseline).*rows) {
    if (row.size == bytes) {
      ++gate.rows_compared;
      return &row;
    }
  }
  gate.rows_unmatched.push_back(bytes);
  return nullptr;
}

// Bandwidth must not fall below (1 - tolerance) of the baseline's, latency not rise above
// (1 + tolerance) of it.
void compare(std::uint32_t bytes, const char* figure, double measured, double old, bool higher_is_better,
             double tolerance, std::vector<Shortfall>& shortfalls) {
  const double limit = higher_is_better ? old * (1 - tolerance) : old * (1 + tolerance);
  const bool short_of = higher_is_better ? measured < limit : measured > limit;
  if (short_of) {
    shortfalls.push_back(
        {.bytes = bytes, .figure = figure, .measured = measured, .limit = limit, .by = "--baseline", .baseline = old});
  }
}

void hold(std::uint32_t bytes, const char* figure, double measured, const std::optional<double>& limit,
          bool higher_is_better, const char* flag, std::vector<Shortfall>& shortfalls) {
  if (!limit) return;
  if (higher_is_better ? measured < *limit : measured > *limit) {
    shortfalls.push_back({.bytes = bytes,
                          .figure = figure,
                          .measured = measured,
                          .limit = *limit,
                          .by = flag,
                          .baseline = std::nullopt});
  }
}

std::string line_of(const Shortfall& s, double tolerance) {
  const bool latency = s.figure.starts_with("t_");
  std::string source = s.by;
  if (s.by == "--baseline") {
    source = fmt::format("the baseline's {:.4g} {} {:g}%", s.baseline.value_or(0), latency ? "plus" : "less",
                         tolerance * 100);
  }
  return fmt::format("{} B: {} {:.4g} {} {:.4g} ({})", s.bytes, s.figure, s.measured, latency ? "above" : "below",
                     s.limit, source);
}

// The report's "gate": the limits, what fell short, and the baseline compared against.
struct GateBaselineRecord {
  std::string file;
  double tolerance = 0;
  std::size_t rows_compared = 0;
  std::vector<std::uint32_t> rows_unmatched;
};
struct GateRecord {
  bool passed = true;
  RowLimits expect;
  std::vector<Shortfall> shortfalls;
  std::optional<GateBaselineRecord> baseline;  // null without --baseline
};

struct GateJson {
  static constexpr described::ReadLimits limits{};
  static constexpr auto missing_keys = described::MissingKeys::refused;

  static void members(Describes<GateRecord> auto& gate, auto&& visit) {
    visit("passed", gate.passed);
    visit("expect", gate.expect);
    visit("shortfalls", gate.shortfalls);
    visit("baseline", gate.baseline);
  }
  // Only the limits given, by the figure they bound.
  static void members(Describes<RowLimits> auto& expect, auto&& visit) {
    visit("bw_average_mib_per_s", expect.min_bw_mib_per_s, when_set);
    visit("message_rate_mpps", expect.min_rate_mpps, when_set);
    visit("t_p99_us", expect.max_lat_p99_us, when_set);
  }
  static void members(Describes<Shortfall> auto& shortfall, auto&& visit) {
    visit("bytes", shortfall.bytes);
    visit("figure", shortfall.figure);
    visit("measured", shortfall.measured);
    visit("limit", shortfall.limit);
    visit("by", shortfall.by);
    visit("baseline", shortfall.baseline, when_set);
  }
  static void members(Describes<GateBaselineRecord> auto& baseline, auto&& visit) {
    visit("file", baseline.file);
    visit("tolerance", baseline.tolerance);
    visit("rows_compared", baseline.rows_compared);
    visit("rows_unmatched", baseline.rows_unmatched);
  }
};

}  // namespace

Baseline read_baseline(const std::string& file) {
  const auto document = parse_file(file);
  if (string_in(document, "tool") != "send_bw") {
    throw UsageError(fmt::format("--baseline: {} is not a send_bw report", file));
  }
  const auto test = document.contains("test") && document["test"].is_object() ? document["test"] : nlohmann::json();
  Baseline baseline{.file = file,
                    .test = string_in(test, "test"),
                    .operation = string_in(test, "operation"),
                    .bandwidth = {},
                    .latency = {}};
  if (baseline.test != "bw" && baseline.test != "lat") {
    throw UsageError(fmt::format("--baseline: {} is not a send_bw client's report (no test that ran)", file));
  }
  read_rows(baseline, document);
  return baseline;
}

void check_baseline_matches(const Baseline& baseline, bw::Test test, bw::Operation operation) {
  if (baseline.test != bw::to_string(test) || baseline.operation != bw::to_string(operation)) {
    throw UsageError(fmt::format("--baseline: {} measured --test {} --op {}, this run --test {} --op {}", baseline.file,
                                 baseline.test, baseline.operation, bw::to_string(test), bw::to_string(operation)));
  }
}

GateResult check_rows(const BwResults& results, const RowLimits& limits, const std::optional<Baseline>& baseline,
                      double tolerance) {
  GateResult gate;
  gate.limits = limits;
  gate.baseline = baseline;
  gate.tolerance = tolerance;
  auto& out = gate.shortfalls;
  for (const auto& row : results.bandwidth) {
    hold(row.size, "bw_average_mib_per_s", row.average_mib_per_s, limits.min_bw_mib_per_s, true, "--expect-bw", out);
    hold(row.size, "message_rate_mpps", row.message_rate_mpps, limits.min_rate_mpps, true, "--expect-rate", out);
    const auto* old = matched_row(gate, &Baseline::bandwidth, row.size);
    if (old == nullptr) continue;
    compare(row.size, "bw_average_mib_per_s", row.average_mib_per_s, old->average_mib_per_s, true, tolerance, out);
  }
  for (const auto& row : results.latency) {
    hold(row.size, "t_p99_us", row.summary.p99_us, limits.max_lat_p99_us, false, "--expect-lat-p99", out);
    const auto* old = matched_row(gate, &Baseline::latency, row.size);
    if (old == nullptr) continue;
    compare(row.size, "t_median_us", row.summary.p50_us, old->summary.p50_us, false, tolerance, out);
    compare(row.size, "t_p99_us", row.summary.p99_us, old->summary.p99_us, false, tolerance, out);
  }
  return gate;
}

std::string GateResult::summary() const {
  if (shortfalls.empty()) return {};
  const auto more = shortfalls.size() - 1;
  return line_of(shortfalls.front(), tolerance) + (more == 0 ? "" : fmt::format(" (and {} more)", more));
}

void GateResult::add_to(nlohmann::json& document) const {
  GateRecord gate{.passed = passed(), .expect = limits, .shortfalls = shortfalls, .baseline = std::nullopt};
  if (baseline) {
    gate.baseline = GateBaselineRecord{.file = baseline->file,
                                       .tolerance = tolerance,
                                       .rows_compared = rows_compared,
                                       .rows_unmatched = rows_unmatched};
  }
  document["gate"] = described::write<GateJson>(gate);
}

std::vector<described::SchemaShape> gate_json_shapes() {
  return {{.schema = "send_bw",
           .pointer = "/properties/gate",
           .shape = described::shape<GateJson, GateRecord>(),
           .extra_keys = {}}};
}

std::string GateResult::text() const {
  std::string text;
  if (baseline) {
    text +=
        fmt::format("baseline {}: {} row(s) compared within {:g}%{}\n", baseline->file, rows_compared, tolerance * 100,
                    rows_unmatched.empty() ? "" : fmt::format(", {} without a row there", rows_unmatched.size()));
  }
  if (shortfalls.empty()) return text + "gate: passed\n";
  text += fmt::format("gate: {} figure(s) fell short\n", shortfalls.size());
  for (const auto& s : shortfalls) text += "  " + line_of(s, tolerance) + "\n";
  return text;
}

}  // namespace rdmakit
