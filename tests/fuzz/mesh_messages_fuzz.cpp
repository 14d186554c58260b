// rdma_mesh's ranks read each other's messages from the job's all-gather: a rank's Node
// (node_from_message) and a phase's observation (observation_from_message). The input is one
// message, read as both, by rank 1 of a job of 4.
//
// Invariants: only ProtocolError leaves a decoder (no nlohmann exception, no undefined
// float-to-int cast); an accepted observation names ranks of the job, and what is accepted
// re-encodes to a message that reads back the same.

#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "lib/base/error.hpp"
#include "lib/mesh/mesh_json.hpp"
#include "lib/mesh/mesh_messages.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rdmakit;
  using namespace rdmakit::mesh;
  const auto text = fuzz::as_text(data, size);
  if (const auto node = fuzz::decoded([&] { return node_from_message(text, 1); })) {
    const auto again = to_json(*node);
    FUZZ_CHECK(to_json(node_from_message(again.dump(), 1)) == again);
  }
  if (const auto observation = fuzz::decoded([&] { return observation_from_message(text, 1, 4); })) {
    FUZZ_CHECK(observation->source >= 0 && observation->source < 4);
    FUZZ_CHECK(observation->destination >= 0 && observation->destination < 4);
    const auto again = to_json(*observation);
    FUZZ_CHECK(to_json(observation_from_message(again.dump(), 1, 4)) == again);
  }
  return 0;
}
