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
  const std::vector<std::string> beside_head{
      "schema_version", "tool",          "role",          "arguments",  "outcome",  "exit_code",     "local_address",
      "peer_address",   "cm_timings_ms", "timings_ms",    "iterations", "bytes",    "rtt_us",        "duration_s",
      "errors",         "form",          "analysed_from", "topology",   "left_out", "retest_passes", "retests_ended",
      "nodes",          "warnings",      "pairs",         "matrices",   "summary"};
  return {{.schema = "rdma_mesh",
           .pointer = "",
           .shape = described::shape<MeshJson, MeshHead>(),
           .extra_keys = beside_head},
          {.schema = "rdma_mesh",
           .pointer = "/$defs/attempt",
           .shape = described::shape<MeshJson, Attempt>(),
           .extra_keys = {}},
          {.schema = "rdma_mesh",
           .pointer = "/$defs/pair",
           .shape = described::shape<MeshJson, PairRecord>(),
           .extra_keys = {}},
          {.schema = "rdma_mesh",
           .pointer = "/$defs/matrix",
           .shape = described::shape<MeshJson, MatrixRecord>(),
           .extra_keys = {}}};
}

}  // namespace rdmakit::mesh
