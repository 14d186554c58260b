// rdma_pingmesh's pinglist, read at start and again whenever it changes: an operator's file,
// often generated. Whatever it holds, the parser takes it or refuses it with a usage error
// naming the line; what it takes is a list a plan can be made from.

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "fuzz_support.hpp"
#include "lib/base/error.hpp"
#include "lib/pingmesh/pinglist.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rdmakit;
  std::vector<pingmesh::Peer> peers;
  try {
    peers = pingmesh::parse_pinglist(fuzz::as_text(data, size), "pinglist");
  } catch (const UsageError& error) {
    FUZZ_CHECK(std::string(error.what()).starts_with("pinglist:"));
    return 0;
  }
  std::set<std::string> addresses;
  std::set<std::string> names;
  for (const auto& peer : peers) {
    FUZZ_CHECK(!peer.address.empty() && !peer.name.empty());
    FUZZ_CHECK(addresses.insert(peer.address).second && names.insert(peer.name).second);
  }
  const pingmesh::Rates rates;
  const auto plan = pingmesh::plan_targets(peers, mesh::Topology{}, "self", "", rates, 3);
  FUZZ_CHECK(plan.targets.size() <= peers.size());
  double total = 0;
  for (const auto& target : plan.targets) total += target.rate_per_s;
  FUZZ_CHECK(total <= rates.cap_per_s * 1.000001);
  return 0;
}
