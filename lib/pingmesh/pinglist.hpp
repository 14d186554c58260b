#pragma once
// Whom rdma_pingmesh probes, and how often: the pinglist file ("ADDRESS [NAME]" a line), and
// with a topology every peer under this node's leaf at the in-leaf rate and a rotating
// sample of the peers under each other leaf at the cross-leaf rate.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lib/topology/topology.hpp"

namespace rdmakit::pingmesh {

struct Peer {
  std::string address;  // IPv4 or IPv6, as written
  std::string name;     // the host's name (the topology's), the address when none is given
  bool operator==(const Peer&) const = default;
};

// Parses the pinglist. Blank lines and text after '#' are ignored; a line is an address and
// optionally a name ([A-Za-z0-9._-], at most 64 characters). Throws UsageError
// "ORIGIN:LINE: ..." for a line that is not that, or an address or a name given twice.
std::vector<Peer> parse_pinglist(std::string_view text, std::string_view origin);
// Reads and parses `path`; UsageError naming the file when it cannot be read.
std::vector<Peer> read_pinglist(const std::string& path);

struct Rates {
  double in_leaf_per_s = 10;        // each peer under this node's leaf (or every peer without a topology)
  double across_per_s = 1;          // each sampled peer under another leaf
  std::size_t sample_per_leaf = 2;  // peers sampled under each other leaf every round; 0: all
  double cap_per_s = 1000;          // all targets together; above it every rate is scaled down
};

struct Target {
  Peer peer;
  double rate_per_s = 0;
  bool same_leaf = true;  // false: a sampled peer under another leaf
};

struct TargetPlan {
  std::vector<Target> targets;
  double scale = 1;  // below 1 where the cap scaled the rates down
};

// This round's targets: every peer but `self_name` (nor its address, `self_address`); with a
// topology that names this node, the peers under its leaf at the in-leaf rate and, under each
// other leaf, sample_per_leaf of them chosen in turn by `round` at the cross-leaf rate (peers
// the topology does not name are probed as if under a leaf of their own). Without one, or
// when it does not name this node, every peer at the in-leaf rate.
TargetPlan plan_targets(const std::vector<Peer>& peers, const mesh::Topology& topology, std::string_view self_name,
                        std::string_view self_address, const Rates& rates, std::uint64_t round);

}  // namespace rdmakit::pingmesh
