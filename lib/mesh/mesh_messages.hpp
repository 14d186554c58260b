#pragma once
// What rdma_mesh's ranks tell each other through the job (MPI's all-gather, or the Slurm
// job's exchange): each rank's Node at the start, and each phase's observations. A rank reads
// the others' messages as a peer's: one bounded parse (lib/base/untrusted_json), every member
// checked for its type and range before use, and ProtocolError naming the rank otherwise, so
// a rank of another build (or a broken one) stops the run with one line instead of a crash.

#include <string_view>

#include "lib/mesh/mesh_direction.hpp"
#include "lib/mesh/mesh_node.hpp"

namespace rdmakit::mesh {

// A Node as `rank` sent it.
Node node_from_message(std::string_view text, int rank);
// An observation as `rank` sent it, in a job of `ranks`: its source and destination are ranks
// of the job.
Observation observation_from_message(std::string_view text, int rank, int ranks);

}  // namespace rdmakit::mesh
