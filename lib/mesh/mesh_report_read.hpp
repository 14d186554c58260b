#pragma once
// A saved rdma_mesh --json report read back for rdma_mesh --analyse, in either form: the
// per-direction `pairs` the live tool writes, or the compact `matrices`. Read as a stream
// (lib/base/json_stream): each direction, matrix row and failure is read by the report's own
// description (lib/mesh/mesh_json) as it goes by and kept as matrix cells, since a 1024-rank
// report in the per-direction form is about a million objects and 500 MB, which a parsed
// document could not hold in the memory the analysis may use.

#include <istream>
#include <string>

#include <nlohmann/json.hpp>

#include "lib/mesh/mesh_matrix.hpp"

namespace rdmakit::mesh {

// rdma_mesh writes one record per direction up to this many ranks, matrices above; a saved
// report in the per-direction form of more ranks is read only if it holds an eighth of its
// directions (a few bytes of it would otherwise make the reader allocate ranks x ranks cells
// per test).
inline constexpr int pairs_form_most_ranks = 128;

struct SavedMesh {
  MeshTable table;
  std::string form;  // "pairs" or "matrix": what the file had
  int rounds = 0;
  int rounds_completed = 0;
  bool finished = false;
  nlohmann::json arguments = nlohmann::json::object();  // the run's, as the report has them
};

// Throws UsageError naming `origin` for a file that is not JSON or ends early (with the byte
// offset), is not an rdma_mesh report, has neither pairs nor matrices, or has a direction
// whose ranks or test do not fit the report's ranks and tests.
SavedMesh read_mesh_report(std::istream& in, const std::string& origin);

}  // namespace rdmakit::mesh
