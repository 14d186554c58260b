#pragma once
// rdma_mesh's JSON, each record described once (lib/base/described_json.hpp): an attempt, a
// rank's observation as the job carries it, a direction as the report's `pairs` lists it, a
// test's matrices and their failures, and the report's own keys. The writer, the strict reader
// (the ranks' messages, --analyse) and the schema's shape all come from the one description.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/described_json.hpp"
#include "lib/mesh/mesh_direction.hpp"
#include "lib/mesh/mesh_matrix.hpp"

namespace rdmakit::mesh {

// A direction as the report's `pairs` lists it: its first attempt's keys at the top, then the
// retests and what the analysis made of it.
struct PairRecord {
  Direction direction;
  std::string unit;  // unit_of(direction.test)
  bool outlier = false;
  Outcome final_outcome = Outcome::completed;  // the last attempt's
  std::optional<double> final_figure;
};

// A figure, or null where a direction failed or was not measured (and on the diagonal).
using MatrixRow = std::vector<std::optional<double>>;

// One test's figures in the report's matrix form (`matrices.<test>`), row = source rank.
struct MatrixRecord {
  std::string unit;
  std::vector<MatrixRow> first;
  std::vector<MatrixRow> final;
  std::vector<Failure> failures;
};

// The keys of the mesh's report that say what ran.
struct MeshHead {
  int ranks = 0;
  std::vector<Test> tests;
  int rounds = 0;
  int rounds_completed = 0;
  bool finished = false;
};

nlohmann::json to_json(const Attempt& attempt);
nlohmann::json to_json(const Observation& observation);
nlohmann::json to_json(const PairRecord& pair);
nlohmann::json to_json(const MatrixRecord& matrix);
nlohmann::json to_json(const MeshHead& head);

// Strict readers: each throws ProtocolError naming the path of what is wrong
// ("pairs[3].final_outcome: 'done' is not one of completed, ...").
Observation observation_from_json(const nlohmann::json& document, const described::Path& path);
PairRecord pair_from_json(const nlohmann::json& document, const described::Path& path);
MatrixRecord matrix_from_json(const nlohmann::json& document, const described::Path& path);
MatrixRow matrix_row_from_json(const nlohmann::json& document, const described::Path& path);
Failure failure_from_json(const nlohmann::json& document, const described::Path& path);
MeshHead head_from_json(const nlohmann::json& document, const described::Path& path);

// The records' shapes and their schema definitions (tests/unit/described_json_test.cpp).
std::vector<described::SchemaShape> mesh_json_shapes();

}  // namespace rdmakit::mesh
