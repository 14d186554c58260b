#pragma once
// rdma_smoke's JSON, each record described once (lib/base/described_json.hpp): a tool run
// as the serving side reports it to its peer and the report embeds it (lib/smoke/remote), and
// the report's cases and summary (lib/smoke/smoke_report). The writer, the strict reader of a
// peer's runs and the shapes held to rdma_smoke.schema.json all come from it.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/child_process.hpp"
#include "lib/base/described_json.hpp"
#include "lib/smoke/plan.hpp"
#include "lib/smoke/run.hpp"

namespace rdmakit::smoke {

// The report's "smoke" section: the addresses, every case, their counts by outcome.
struct SmokeRecord {
  std::vector<std::string> addresses;
  std::vector<CaseResult> cases;
  std::size_t passed = 0;
  std::size_t failed = 0;
  std::size_t skipped = 0;
  nlohmann::json no_device;  // diag-bind's report when there was nothing to test, else null
  double seconds = 0;
  std::optional<std::uint64_t> unauthenticated;  // --serve: peers the key handshake refused
};

// A tool run's report is kept as the tool wrote it, its stderr whole (newlines and all, up to
// the cap the child process keeps).
struct SmokeJson : described::ObjectOrNullLeaf {
  using ObjectOrNullLeaf::leaf_shape;
  using ObjectOrNullLeaf::read_leaf;
  using ObjectOrNullLeaf::write_leaf;
  static constexpr described::ReadLimits limits{.max_text_bytes = ChildProcess::output_cap, .max_list_entries = 64};
  static constexpr auto missing_keys = described::MissingKeys::refused;

  static void members(described::Describes<ToolRun> auto& run, auto&& visit) {
    visit("role", run.role);
    visit("command", run.command);
    visit("exit_code", run.outcome.exit_code);
    visit("signal", run.outcome.signal);
    visit("timed_out", run.outcome.timed_out);
    visit("seconds", run.outcome.seconds);
    visit("report", run.report);
    visit("stderr", run.outcome.err);
    visit("start_error", run.outcome.start_error, described::when_set);
  }
  static void members(described::Describes<CaseResult> auto& result, auto&& visit) {
    visit("name", result.name);
    visit("tool", result.tool);
    visit("address", result.address);
    visit("direction", result.direction);
    visit("outcome", result.outcome);
    visit("reason", result.reason);
    visit("hint", result.hint);
    visit("seconds", result.seconds);
    visit("runs", result.runs);
  }
  static void members(described::Describes<SmokeRecord> auto& smoke, auto&& visit) {
    visit("addresses", smoke.addresses);
    visit("cases", smoke.cases);
    visit("passed", smoke.passed);
    visit("failed", smoke.failed);
    visit("skipped", smoke.skipped);
    visit("no_device", smoke.no_device);
    visit("seconds", smoke.seconds);
    visit("unauthenticated", smoke.unauthenticated, described::when_set);
  }

  // Any bytes a tool printed, within the bound: a terminal is not where they go.
  static nlohmann::json write_leaf(const std::string& text) { return text; }
  static void read_leaf(const nlohmann::json& value, const described::Path& path, std::string& out) {
    if (!value.is_string()) described::reject(path, "expected a string");
    if (value.get_ref<const std::string&>().size() > limits.max_text_bytes) described::reject(path, "too long");
    out = value.get<std::string>();
  }
  static nlohmann::json leaf_shape(const std::string* /*kind*/) { return {{"type", "string"}}; }

  // Written by name; a peer's runs carry neither.
  static nlohmann::json write_leaf(Direction direction) { return to_string(direction); }
  static nlohmann::json leaf_shape(const Direction* /*kind*/) { return described::named_shape(direction_names); }
  static nlohmann::json write_leaf(CaseOutcome outcome) { return to_string(outcome); }
  static nlohmann::json leaf_shape(const CaseOutcome* /*kind*/) { return described::named_shape(case_outcome_names); }
};

}  // namespace rdmakit::smoke
