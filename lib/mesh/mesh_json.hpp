#pragma once
// rdma_mesh's JSON, each record described once (lib/base/described_json.hpp): an attempt, a
// rank's observation as the job carries it, a direction as the report's `pairs` lists it, a
// test's matrices and their failures, and the report's own keys. The writer, the strict reader
// (the ranks' messages, --analyse) and the schema's shape all come from the one description.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/described_json.hpp"
#include "lib/mesh/mesh_culprits.hpp"
#include "lib/mesh/mesh_direction.hpp"
#include "lib/mesh/mesh_matrix.hpp"
#include "lib/mesh/mesh_plan.hpp"

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

// One retest pass: the pairs measured again, in rounds of pairs that share no rank.
struct RetestPassRecord {
  std::size_t pairs = 0;
  std::vector<Round> rounds;  // each pair written [low, high]
};

// The keys of the mesh's report that say what ran: what --analyse reads back (and what
// tests/synth writes).
struct MeshHead {
  int ranks = 0;
  std::vector<Test> tests;
  int rounds = 0;
  int rounds_completed = 0;
  bool finished = false;
};

// The report's keys beside them that say how it ran; written, never read back (reports saved
// before a key was added still read).
struct MeshRunRecord {
  std::vector<int> left_out;  // the ranks in no pair of the plan
  std::vector<RetestPassRecord> retest_passes;
  RetestEnd retests_ended = RetestEnd::running;
  std::vector<std::string> warnings;  // a mixed fabric, what --topology could not place; left out when none
  std::string analysed_from;          // --analyse's saved report; left out for a live run
  std::string topology;               // the topology file the culprits were placed with; left out without one
  std::string form;                   // "pairs" or "matrix"
};

// One test's summary (`summary.<test>`): the spread, the slowest directions, the outliers,
// the ranks whose every link is bad, and the culprits.
struct SlowestRecord {
  int source = 0;
  int destination = 0;
  double figure = 0;
};
struct OutlierRecord {
  int source = 0;
  int destination = 0;
  double figure = 0;
  std::optional<double> first_figure;
  double ratio = 0;
};
struct NodeProblemRecord {
  int rank = 0;
  std::string host;
  std::size_t links = 0;
};
struct SummaryRecord {
  std::string unit;
  std::string figure;  // what the figures are: "average bandwidth", ...
  std::size_t measured = 0;
  std::size_t failed = 0;
  std::optional<double> min;
  std::optional<double> median;
  std::optional<double> first_pass_median;
  std::optional<double> max;
  double threshold = 0;
  Rule rule = Rule::median;
  std::vector<SlowestRecord> slowest;
  std::vector<OutlierRecord> outliers;
  std::vector<NodeProblemRecord> node_problems;
  std::vector<Culprit> culprits;
};

nlohmann::json to_json(const Attempt& attempt);
nlohmann::json to_json(const Observation& observation);
nlohmann::json to_json(const PairRecord& pair);
nlohmann::json to_json(const MatrixRecord& matrix);
nlohmann::json to_json(const MeshHead& head);
nlohmann::json to_json(const MeshRunRecord& run);
nlohmann::json to_json(const SummaryRecord& summary);

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
