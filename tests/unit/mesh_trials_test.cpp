// locate_culprits against issue 36's targets on seeded synthetic meshes (tests/synth): 100
// trials of each planted fault at N = 64, and the generator's own promises (a seed gives one
// mesh, the topology it writes reads back).

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <sstream>
#include <string>

#include "lib/mesh/mesh_report_read.hpp"
#include "lib/topology/topology.hpp"
#include "tests/synth/mesh_synth.hpp"
#include "tests/synth/mesh_trials.hpp"

namespace {

using rdmakit::mesh::CellState;
using rdmakit::mesh::CulpritKind;
using rdmakit::synth::FaultKind;
using rdmakit::synth::SynthSpec;

constexpr int trials = 100;

SynthSpec spec_of(FaultKind kind) {
  SynthSpec spec;
  spec.ranks = 64;
  spec.ranks_per_host = kind == FaultKind::nic ? 2 : 1;  // nic: 32 hosts of two ranks
  spec.hosts_per_leaf = 16;
  spec.fault.kind = kind;
  return spec;
}

// The share of `trials` seeded meshes whose planted culprit comes first (mesh_trials.hpp).
void expect_named(FaultKind kind, double at_least) {
  const auto counts = rdmakit::synth::run_trials(spec_of(kind), trials, 1);
  std::string seeds;
  for (const auto seed : counts.failed_seeds) seeds += " " + std::to_string(seed);
  EXPECT_GE(counts.right, static_cast<int>(at_least * trials))
      << to_string(kind) << ": " << counts.wrong << " wrong, " << counts.none << " none; seeds" << seeds;
}

TEST(MeshTrials, CleanMeshesNameNoCulprit) {
  expect_named(FaultKind::none, 0.99);
}
TEST(MeshTrials, BadNodeNamed) {
  expect_named(FaultKind::node, 0.99);
}
TEST(MeshTrials, BadLinkNamed) {
  expect_named(FaultKind::link, 0.99);
}
TEST(MeshTrials, BadLeafUplinksNamed) {
  expect_named(FaultKind::leaf_uplink, 0.95);
}
// No target in the issue for these two; they hold the same bar as nodes.
TEST(MeshTrials, BadNicNamed) {
  expect_named(FaultKind::nic, 0.99);
}
TEST(MeshTrials, FailedNodeNamedByCause) {
  expect_named(FaultKind::failed_node, 0.99);
}

TEST(MeshSynth, ASeedGivesOneMesh) {
  auto spec = spec_of(FaultKind::link);
  spec.seed = 42;
  const auto a = rdmakit::synth::make_mesh(spec);
  const auto b = rdmakit::synth::make_mesh(spec);
  ASSERT_TRUE(a.expected && b.expected);
  EXPECT_EQ(a.expected->name, b.expected->name);
  const auto& first = a.table.tests.front().last;
  const auto& second = b.table.tests.front().last;
  for (std::size_t cell = 0; cell < first.size(); ++cell) {
    if (!std::isnan(first[cell])) {
      EXPECT_EQ(first[cell], second[cell]) << cell;
    }
  }
}

TEST(MeshSynth, PlantsWhatItSays) {
  auto spec = spec_of(FaultKind::nic);
  spec.seed = 7;
  spec.fault.severity = 0.5;
  const auto synth = rdmakit::synth::make_mesh(spec);
  ASSERT_TRUE(synth.expected);
  EXPECT_EQ(synth.expected->kind, CulpritKind::nic);
  // "node0006/mlx5_1 (rank 11)": the rank's host and device as the nodes have them.
  const auto rank = std::stoi(synth.expected->name.substr(synth.expected->name.find("(rank ") + 6));
  const auto& node = synth.table.nodes[static_cast<std::size_t>(rank)];
  EXPECT_EQ(synth.expected->name, node.host + "/" + node.device + " (rank " + std::to_string(rank) + ")");
  EXPECT_EQ(node.device, rank % 2 == 0 ? "mlx5_0" : "mlx5_1");
  const auto& matrix = synth.table.tests.front();
  const int other = rank ^ 1;  // the same host's other NIC
  const int far = (rank + 10) % 64;
  EXPECT_LT(matrix.last[matrix.index(rank, far)], 0.5 * 1.05 * spec.base + 1e-9);
  EXPECT_GT(matrix.last[matrix.index(other, far)], 0.95 * spec.base - 1e-9);
  EXPECT_EQ(matrix.state[matrix.index(rank, rank)], CellState::not_measured);
}

TEST(MeshSynth, FailedNodeFailsWithItsCause) {
  auto spec = spec_of(FaultKind::failed_node);
  spec.seed = 3;
  const auto synth = rdmakit::synth::make_mesh(spec);
  const auto& matrix = synth.table.tests.front();
  EXPECT_EQ(matrix.failures.size(), 2U * 63U);  // every direction to and from one rank
  for (const auto& failure : matrix.failures) {
    EXPECT_EQ(failure.cause, "netdev_without_rdma");
    EXPECT_EQ(matrix.state[matrix.index(failure.source, failure.destination)], CellState::failed);
  }
}

TEST(MeshSynth, TopologyConfReadsBack) {
  auto spec = spec_of(FaultKind::none);
  spec.ranks = 1024;
  spec.noise = 0;
  const auto synth = rdmakit::synth::make_mesh(spec);
  EXPECT_EQ(synth.topology.leaf_of("node0001"), "leaf01");
  EXPECT_EQ(synth.topology.leaf_of("node1024"), "leaf64");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::tmpfile(), &std::fclose);
  ASSERT_TRUE(file);
  rdmakit::synth::write_topology_conf(synth.topology, file.get());
  std::rewind(file.get());
  std::string text;
  for (int c = std::fgetc(file.get()); c != EOF; c = std::fgetc(file.get())) text += static_cast<char>(c);
  EXPECT_NE(text.find("SwitchName=leaf64 Nodes=node[1009-1024]\n"), std::string::npos) << text;
  const auto read = rdmakit::mesh::parse_slurm_topology(text, "synth.conf");
  EXPECT_EQ(read.leaf_of_host, synth.topology.leaf_of_host);
  EXPECT_EQ(read.parent_of_switch, synth.topology.parent_of_switch);
  EXPECT_EQ(read.switch_hops("node0001", "node0016"), 1);
  EXPECT_EQ(read.switch_hops("node0001", "node0017"), 3);
  EXPECT_EQ(read.switch_hops("node0001", "node1024"), 5);  // leaf, spine01, core, spine04, leaf
}

// The report mesh_synth writes reads back (lib/mesh/mesh_report_read) as the matrix it
// was written from: the benchmark times --analyse on what the generator meant.
TEST(MeshSynth, ReportReadsBackAsItsMatrix) {
  auto spec = spec_of(FaultKind::failed_node);
  spec.ranks = 16;
  spec.hosts_per_leaf = 4;
  const auto synth = rdmakit::synth::make_mesh(spec);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::tmpfile(), &std::fclose);
  ASSERT_TRUE(file);
  rdmakit::synth::write_report(synth.table, file.get());
  std::rewind(file.get());
  std::string text;
  for (int c = std::fgetc(file.get()); c != EOF; c = std::fgetc(file.get())) text += static_cast<char>(c);
  std::istringstream in(text);
  const auto saved = rdmakit::mesh::read_mesh_report(in, "synth.json");
  EXPECT_EQ(saved.form, "pairs");
  ASSERT_EQ(saved.table.ranks, 16);
  ASSERT_EQ(saved.table.nodes.size(), 16U);
  EXPECT_EQ(saved.table.nodes[3].host, synth.table.nodes[3].host);
  const auto* read = saved.table.find("bw");
  ASSERT_NE(read, nullptr);
  const auto& written = synth.table.tests.front();
  for (std::size_t cell = 0; cell < written.cell_count(); ++cell) {
    EXPECT_EQ(read->state[cell], written.state[cell]) << cell;
    if (written.has_figure(cell)) {
      EXPECT_DOUBLE_EQ(read->last[cell], written.last[cell]) << cell;
    }
  }
  ASSERT_EQ(read->failures.size(), written.failures.size());
  for (const auto& failure : read->failures) EXPECT_EQ(failure.cause, "netdev_without_rdma");
}

}  // namespace
