#pragma once
// What rdma_mesh's ranks tell each other through the job (MPI's all-gather, or the Slurm
// job's exchange): each rank's Node at the start, and each phase's observations. A rank reads
// the others' messages as a peer's: one bounded parse (lib/base/untrusted_json), every member
// checked for its type and range before use, and ProtocolError naming the rank otherwise, so
// a rank of another build (or a broken one) stops the run with one line instead of a crash.

#include <string_view>

#include <nlohmann/json.hpp>

#include "lib/mesh/mesh_node.hpp"
#include "lib/mesh/rdma_mesh_session.hpp"

namespace rdmakit::mesh {

// One observation of a direction, from the side that made it.
struct Observation {
  int source = 0;
  int destination = 0;
  Test test = Test::bandwidth;
  bool sender = false;
  Attempt attempt;
};

nlohmann::json to_json(const Observation& observation);

// A Node as `rank` sent it.
Node node_from_message(std::string_view text, int rank);
// An observation as `rank` sent it, in a job of `ranks`: its source and destination are ranks
// of the job.
Observation observation_from_message(std::string_view text, int rank, int ranks);

}  // namespace rdmakit::mesh
