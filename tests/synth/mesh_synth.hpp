#pragma once
// Synthetic rdma_mesh meshes with one planted fault and uniform noise, for the culprit
// trials (tests/unit/mesh_trials_test.cpp, mesh_trials) and the --analyse benchmark
// (mesh_synth, scripts/bench-mesh.sh). The seed decides the victim, the severity and the
// noise, so a trial that goes wrong can be replayed from its seed alone.

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "lib/mesh/mesh_culprits.hpp"
#include "lib/mesh/mesh_matrix.hpp"
#include "lib/topology/topology.hpp"

namespace rdmakit::synth {

enum class FaultKind {
  none,
  node,         // every direction to and from one host low
  nic,          // every direction of one rank of a multi-rank host low, the host's others fine
  link,         // both directions between one pair of hosts low
  leaf_uplink,  // every direction between one leaf's hosts and the rest low, inside the leaf fine
  failed_node,  // every direction of one host's ranks failed with `cause`
};
std::string_view to_string(FaultKind kind);  // "none", "node", "nic", "link", "leaf", "failed"
std::optional<FaultKind> parse_fault(std::string_view text);

struct Fault {
  FaultKind kind = FaultKind::none;
  // The low directions' figure as a fraction of the healthy one (times are divided by it);
  // 0: drawn from the seed in [0.3, 0.6].
  double severity = 0;
  std::string cause = "netdev_without_rdma";  // failed_node: its ranks' verdict
};

struct SynthSpec {
  int ranks = 64;
  int ranks_per_host = 1;  // must divide ranks; > 1 gives devices mlx5_0, mlx5_1, ...
  int hosts_per_leaf = 16;
  double base = 10000;  // the healthy figure: MiB/s for bw, us for lat
  double noise = 0.05;  // each figure times a uniform draw from [1 - noise, 1 + noise]
  Fault fault;
  std::uint64_t seed = 1;
  std::string test = "bw";  // "bw" or "lat"
};

// The culprit locate_culprits should name for the planted fault (lib/mesh/mesh_culprits.hpp
// Culprit.name's forms).
struct Expected {
  mesh::CulpritKind kind = mesh::CulpritKind::node;
  std::string name;
};

struct Synth {
  mesh::MeshTable table;  // one test, spec.test
  mesh::Topology topology;
  std::optional<Expected> expected;  // none for FaultKind::none
  double severity = 1;               // what was drawn
};

// Hosts node0001..: rank r on host r / ranks_per_host; leaves leaf01.. of hosts_per_leaf hosts
// each; spines spine01.. of 16 leaves each, under one switch "core" when there are several.
// Throws std::invalid_argument for a spec it cannot plant (ranks not a multiple of
// ranks_per_host, fewer than two hosts, a nic fault with one rank a host, a leaf fault with one
// leaf, a test other than bw and lat).
Synth make_mesh(const SynthSpec& spec);

// The name locate_culprits gives a link between the hosts of ranks a and b.
std::string link_name(const mesh::MeshTable& table, int a, int b);

struct ReportSettings {
  double threshold = mesh::default_bw_threshold;  // bw; lat uses default_time_threshold
  double duration_s = 0;                          // 0: an estimate from the rounds
};

// rdma_mesh's --json report of `table` in the per-direction form the tool writes (every key
// of doc/schema/rdma_mesh.schema.json, in the tool's order), streamed: no document in memory,
// so a 1024-rank report (some 400 MB) takes seconds. Throws std::runtime_error when the
// stream fails.
void write_report(const mesh::MeshTable& table, std::FILE* out, const ReportSettings& settings = {});

// Slurm's topology.conf for `topology`: a line per switch, hosts and child switches as
// hostlist ranges (leaf01 Nodes=node[0001-0016]).
void write_topology_conf(const mesh::Topology& topology, std::FILE* out);

}  // namespace rdmakit::synth
