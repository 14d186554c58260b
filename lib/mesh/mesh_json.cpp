#include "lib/mesh/mesh_json.hpp"

#include <concepts>

#include "lib/base/named_values.hpp"

namespace rdmakit::mesh {

std::string_view to_string(Test test) {
  return name_in(test_names, test, "?");
}

std::optional<Test> test_named(std::string_view name) {
  return value_named<Test>(test_names, name);
}

std::string_view unit_of(Test test) {
  switch (test) {
    case Test::bandwidth: return "MiB/s";
    case Test::latency: return "us";
    case Test::connect: return "ms";
  }
  return "";
}

namespace {

using described::Describes;

struct MeshJson {
  // A job's ranks (a matrix row has one entry each) and an error's message.
  static constexpr described::ReadLimits limits{.max_text_bytes = 4096, .max_list_entries = 16384};
  static constexpr auto missing_keys = described::MissingKeys::refused;

  static void members(Describes<Attempt> auto& attempt, auto&& visit) {
    visit("outcome", attempt.outcome);
    visit("figure", attempt.figure);
    visit("figures", attempt.figures);
    visit("error", attempt.error);
  }
  static void members(Describes<Observation> auto& observation, auto&& visit) {
    visit("source", observation.source);
    visit("destination", observation.destination);
    visit("test", observation.test);
    visit("sender", observation.sender);
    visit("attempt", observation.attempt);
  }
  static void members(Describes<PairRecord> auto& pair, auto&& visit) {
    auto& direction = pair.direction;
    visit("source", direction.source);
    visit("destination", direction.destination);
    visit("test", direction.test);
    visit("unit", pair.unit);
    visit("round", direction.round);
    visit("cause", direction.cause, described::null_when_unset);
    members(direction.first, visit);  // the first attempt's keys beside the direction's
    visit("retests", direction.retests);
    visit("outlier", pair.outlier);
    visit("final_outcome", pair.final_outcome);
    visit("final_figure", pair.final_figure);
  }
  static void members(Describes<Failure> auto& failure, auto&& visit) {
    visit("source", failure.source);
    visit("destination", failure.destination);
    visit("cause", failure.cause, described::null_when_unset);
    visit("message", failure.message);
  }
  static void members(Describes<MatrixRecord> auto& matrix, auto&& visit) {
    visit("unit", matrix.unit);
    visit("first", matrix.first);
    visit("final", matrix.final);
    visit("failures", matrix.failures);
  }
  static void members(Describes<MeshHead> auto& head, auto&& visit) {
    visit("ranks", head.ranks);
    visit("tests", head.tests);
    visit("rounds", head.rounds);
    visit("rounds_completed", head.rounds_completed);
    visit("finished", head.finished);
  }
  static void members(Describes<MeshRunRecord> auto& run, auto&& visit) {
    visit("left_out", run.left_out);
    visit("retest_passes", run.retest_passes);
    visit("retests_ended", run.retests_ended);
    visit("warnings", run.warnings, described::when_set);
    visit("analysed_from", run.analysed_from, described::when_set);
    visit("topology", run.topology, described::when_set);
    visit("form", run.form);
  }
  static void members(Describes<RetestPassRecord> auto& pass, auto&& visit) {
    visit("pairs", pass.pairs);
    visit("rounds", pass.rounds);
  }
  static void members(Describes<SlowestRecord> auto& slowest, auto&& visit) {
    visit("source", slowest.source);
    visit("destination", slowest.destination);
    visit("figure", slowest.figure);
  }
  static void members(Describes<OutlierRecord> auto& outlier, auto&& visit) {
    visit("source", outlier.source);
    visit("destination", outlier.destination);
    visit("figure", outlier.figure);
    visit("first_figure", outlier.first_figure);
    visit("ratio", outlier.ratio);
  }
  static void members(Describes<NodeProblemRecord> auto& problem, auto&& visit) {
    visit("rank", problem.rank);
    visit("host", problem.host);
    visit("links", problem.links);
  }
  static void members(Describes<Culprit> auto& culprit, auto&& visit) {
    visit("kind", culprit.kind);
    visit("name", culprit.name);
    visit("ranks", culprit.ranks);
    visit("low", culprit.low);
    visit("total", culprit.total);
    visit("median_ratio", culprit.median_ratio);
    visit("confidence", culprit.confidence);
    visit("evidence", culprit.evidence);
    visit("next", culprit.next);
  }
  static void members(Describes<SummaryRecord> auto& summary, auto&& visit) {
    visit("unit", summary.unit);
    visit("figure", summary.figure);
    visit("measured", summary.measured);
    visit("failed", summary.failed);
    visit("min", summary.min);
    visit("median", summary.median);
    visit("first_pass_median", summary.first_pass_median);
    visit("max", summary.max);
    visit("threshold", summary.threshold);
    visit("rule", summary.rule);
    visit("slowest", summary.slowest);
    visit("outliers", summary.outliers);
    visit("node_problems", summary.node_problems);
    visit("culprits", summary.culprits);
  }

  // An attempt's figures: an object, never null (an attempt's error is an optional one).
  template <std::same_as<nlohmann::json> Value>
  static nlohmann::json write_leaf(const Value& value) {
    return value;
  }
  static void read_leaf(const nlohmann::json& value, const described::Path& path, nlohmann::json& out) {
    described::read_object(value, path);
    out = value;
  }
  static nlohmann::json leaf_shape(const nlohmann::json* /*kind*/) { return {{"type", "object"}}; }

  static nlohmann::json write_leaf(Outcome outcome) { return to_string(outcome); }
  static void read_leaf(const nlohmann::json& value, const described::Path& path, Outcome& out) {
    described::read_named(value, path, out, outcome_named, outcome_names);
  }
  static nlohmann::json leaf_shape(const Outcome* /*kind*/) { return described::named_shape(outcome_names); }

  static nlohmann::json write_leaf(Test test) { return to_string(test); }
  static void read_leaf(const nlohmann::json& value, const described::Path& path, Test& out) {
    described::read_named(value, path, out, test_named, test_names);
  }
  static nlohmann::json leaf_shape(const Test* /*kind*/) { return described::named_shape(test_names); }

  // Written only: --analyse judges again rather than read the summary and the run's keys.
  static nlohmann::json write_leaf(RetestEnd end) { return to_string(end); }
  static nlohmann::json leaf_shape(const RetestEnd* /*kind*/) { return described::named_shape(retest_end_names); }
  static nlohmann::json write_leaf(Rule rule) { return to_string(rule); }
  static nlohmann::json leaf_shape(const Rule* /*kind*/) { return described::named_shape(rule_names); }
  static nlohmann::json write_leaf(CulpritKind kind) { return to_string(kind); }
  static nlohmann::json leaf_shape(const CulpritKind* /*kind*/) { return described::named_shape(culprit_kind_names); }

  // A pair of ranks as [low, high].
  static nlohmann::json write_leaf(const RankPair& pair) { return {pair.low, pair.high}; }
  static nlohmann::json leaf_shape(const RankPair* /*kind*/) {
    return {{"type", "array"}, {"items", {{"type", "integer"}}}};
  }
};

}  // namespace

nlohmann::json to_json(const Attempt& attempt) {
  return described::write<MeshJson>(attempt);
}
nlohmann::json to_json(const Observation& observation) {
  return described::write<MeshJson>(observation);
}
nlohmann::json to_json(const PairRecord& pair) {
  return described::write<MeshJson>(pair);
}
nlohmann::json to_json(const MatrixRecord& matrix) {
  return described::write<MeshJson>(matrix);
}
nlohmann::json to_json(const MeshHead& head) {
  return described::write<MeshJson>(head);
}
nlohmann::json to_json(const MeshRunRecord& run) {
  return described::write<MeshJson>(run);
}
nlohmann::json to_json(const SummaryRecord& summary) {
  return described::write<MeshJson>(summary);
}

Observation observation_from_json(const nlohmann::json& document, const described::Path& path) {
  return described::read_document<MeshJson, Observation>(document, path);
}
PairRecord pair_from_json(const nlohmann::json& document, const described::Path& path) {
  return described::read_document<MeshJson, PairRecord>(document, path);
}
MatrixRecord matrix_from_json(const nlohmann::json& document, const described::Path& path) {
  return described::read_document<MeshJson, MatrixRecord>(document, path);
}
MatrixRow matrix_row_from_json(const nlohmann::json& document, const described::Path& path) {
  return described::read_document<MeshJson, MatrixRow>(document, path);
}
Failure failure_from_json(const nlohmann::json& document, const described::Path& path) {
  return described::read_document<MeshJson, Failure>(document, path);
}
MeshHead head_from_json(const nlohmann::json& document, const described::Path& path) {
  return described::read_document<MeshJson, MeshHead>(document, path);
}

std::vector<described::SchemaShape> mesh_json_shapes() {
  // The report's other keys: every tool's (lib/base/report.cpp) and those written beside the head.
  // The report's other keys: every tool's (lib/base/report.cpp) and the mesh's sections'.
  const std::vector<std::string> common{
      "schema_version", "tool",          "role",       "arguments",  "outcome", "exit_code", "local_address",
      "peer_address",   "cm_timings_ms", "timings_ms", "iterations", "bytes",   "rtt_us",    "duration_s",
      "errors",         "nodes",         "pairs",      "matrices",   "summary"};
  const std::vector<std::string> head_keys{"ranks", "tests", "rounds", "rounds_completed", "finished"};
  const std::vector<std::string> run_keys{"left_out",      "retest_passes", "retests_ended", "warnings",
                                          "analysed_from", "topology",      "form"};
  auto beside_head = common;
  beside_head.insert(beside_head.end(), run_keys.begin(), run_keys.end());
  auto beside_run = common;
  beside_run.insert(beside_run.end(), head_keys.begin(), head_keys.end());
  return {{.schema = "rdma_mesh",
           .pointer = "",
           .shape = described::shape<MeshJson, MeshHead>(),
           .extra_keys = beside_head},
          {.schema = "rdma_mesh",
           .pointer = "",
           .shape = described::shape<MeshJson, MeshRunRecord>(),
           .extra_keys = beside_run},
          {.schema = "rdma_mesh",
           .pointer = "/$defs/attempt",
           .shape = described::shape<MeshJson, Attempt>(),
           .extra_keys = {}},
          {.schema = "rdma_mesh",
           .pointer = "/$defs/pair",
           .shape = described::shape<MeshJson, PairRecord>(),
           .extra_keys = {}},
          {.schema = "rdma_mesh",
           .pointer = "/$defs/summary",
           .shape = described::shape<MeshJson, SummaryRecord>(),
           .extra_keys = {}},
          {.schema = "rdma_mesh",
           .pointer = "/$defs/matrix",
           .shape = described::shape<MeshJson, MatrixRecord>(),
           .extra_keys = {}}};
}

}  // namespace rdmakit::mesh
