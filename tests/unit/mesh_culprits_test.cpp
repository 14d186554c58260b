#include "lib/mesh/mesh_culprits.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace rdmakit::mesh {
namespace {

// A mesh of `hosts` hosts with `per_host` ranks each (one per NIC), every direction measured.
struct Mesh {
  TestMatrix matrix;
  std::vector<Node> nodes;

  void set(int source, int destination, double figure) {
    const std::size_t at = matrix.index(source, destination);
    matrix.first[at] = figure;
    matrix.last[at] = figure;
    matrix.state[at] = CellState::measured;
  }
  void scale(int source, int destination, double factor) {
    set(source, destination, matrix.last[matrix.index(source, destination)] * factor);
  }
  // Every direction to and from `rank` scaled.
  void scale_rank(int rank, double factor) {
    for (int other = 0; other < matrix.ranks; ++other) {
      if (other == rank) continue;
      scale(rank, other, factor);
      scale(other, rank, factor);
    }
  }
  void fail(int source, int destination, const std::string& cause) {
    const std::size_t at = matrix.index(source, destination);
    matrix.first[at] = no_figure;
    matrix.last[at] = no_figure;
    matrix.state[at] = CellState::failed;
    matrix.failures.push_back(Failure{source, destination, cause, "could not connect"});
  }
};

// A fixed pattern within +-5%: the same on every run, spread over the whole band.
double noise(int source, int destination) {
  constexpr int steps = 21;
  return 1 + static_cast<double>((source * 7 + destination * 13) % steps - steps / 2) / 200.0;
}

std::string host_name(int host) {
  return fmt::format("node{:02}", host + 1);
}

Mesh make_mesh(int hosts, int per_host, Better better = Better::higher, double figure = 100) {
  const int ranks = hosts * per_host;
  Mesh mesh{TestMatrix(better == Better::higher ? "bw" : "lat", better, ranks), {}};
  for (int rank = 0; rank < ranks; ++rank) {
    Node node;
    node.rank = rank;
    node.host = host_name(rank / per_host);
    node.device = fmt::format("mlx5_{}", rank % per_host);
    mesh.nodes.push_back(node);
    for (int other = 0; other < ranks; ++other) {
      if (other != rank) mesh.set(rank, other, figure * noise(rank, other));
    }
  }
  return mesh;
}

// `leaves` leaves of consecutive hosts, "leaf1", "leaf2", ...
Topology make_topology(int hosts, int leaves) {
  Topology topology;
  const int per_leaf = hosts / leaves;
  for (int host = 0; host < hosts; ++host)
    topology.leaf_of_host[host_name(host)] = "leaf" + std::to_string(host / per_leaf + 1);
  for (int leaf = 1; leaf <= leaves; ++leaf) topology.parent_of_switch["leaf" + std::to_string(leaf)] = "spine1";
  topology.origin = "test";
  return topology;
}

std::vector<Culprit> locate(const Mesh& mesh, const Topology* topology = nullptr, JudgeSettings judge = {}) {
  LocateSettings settings;
  settings.judge = judge;
  settings.topology = topology;
  return locate_culprits(mesh.matrix, mesh.nodes, settings);
}

std::string listed(const std::vector<Culprit>& culprits) {
  std::string text;
  for (const Culprit& culprit : culprits) {
    text += fmt::format("{} {}: {} (confidence {:.2f})\n", to_string(culprit.kind), culprit.name, culprit.evidence,
                        culprit.confidence);
  }
  return text;
}

TEST(MeshCulprits, CleanMatrixWithNoiseNamesNone) {
  const Mesh mesh = make_mesh(8, 1);
  const std::vector<bool> bad = bad_cells(mesh.matrix, {});
  EXPECT_EQ(std::ranges::count(bad, true), 0);
  EXPECT_TRUE(locate(mesh).empty());
  const Topology topology = make_topology(8, 2);
  EXPECT_TRUE(locate(mesh, &topology).empty());
  const Mesh larger = make_mesh(32, 2);
  const Topology leaves = make_topology(32, 4);
  EXPECT_TRUE(locate(larger, &leaves).empty());
}

TEST(MeshCulprits, ReferenceMedianIsTheFirstPassOrGiven) {
  Mesh mesh = make_mesh(4, 1);
  mesh.set(0, 1, 70);  // below 0.8 x ~100
  std::vector<bool> bad = bad_cells(mesh.matrix, {});
  EXPECT_TRUE(bad[mesh.matrix.index(0, 1)]);
  EXPECT_EQ(std::ranges::count(bad, true), 1);
  // Against a first pass whose median was 200, everything is low.
  bad = bad_cells(mesh.matrix, JudgeSettings{Rule::median, default_bw_threshold, 200.0});
  EXPECT_EQ(std::ranges::count(bad, true), 12);
  // Failed cells are bad; cells never measured are not.
  mesh.fail(2, 3, "");
  mesh.matrix.state[mesh.matrix.index(3, 2)] = CellState::not_measured;
  bad = bad_cells(mesh.matrix, {});
  EXPECT_TRUE(bad[mesh.matrix.index(2, 3)]);
  EXPECT_FALSE(bad[mesh.matrix.index(3, 2)]);
  EXPECT_FALSE(bad[mesh.matrix.index(0, 0)]);
}

TEST(MeshCulprits, BadNodeLowBothWays) {
  Mesh mesh = make_mesh(8, 1);
  mesh.scale_rank(3, 0.4);
  const auto culprits = locate(mesh);
  ASSERT_EQ(culprits.size(), 1U) << listed(culprits);
  const Culprit& node = culprits.front();
  EXPECT_EQ(node.kind, CulpritKind::node);
  EXPECT_EQ(node.name, "node04");
  EXPECT_EQ(node.ranks, std::vector<int>{3});
  EXPECT_EQ(node.low, 14U);
  EXPECT_EQ(node.total, 14U);
  ASSERT_TRUE(node.median_ratio.has_value());
  EXPECT_NEAR(*node.median_ratio, 0.4, 0.03);
  EXPECT_GT(node.confidence, 0.7);
  EXPECT_NE(node.evidence.find("14 of 14 directions"), std::string::npos) << node.evidence;
  EXPECT_EQ(node.next, "check node04's port counters (ethtool -S / perfquery) and run diag-bind on it");
}

TEST(MeshCulprits, NodeLowOnlyAsSourceIsNoNode) {
  Mesh mesh = make_mesh(8, 1);
  for (int other = 0; other < 8; ++other) {
    if (other != 3) mesh.scale(3, other, 0.6);
  }
  for (const Culprit& culprit : locate(mesh)) EXPECT_NE(culprit.kind, CulpritKind::node) << listed(locate(mesh));
}

TEST(MeshCulprits, RanksAreTheirOwnNodesWhenHostsDoNotTellThemApart) {
  Mesh mesh = make_mesh(8, 1);
  for (Node& node : mesh.nodes) node.host = "vm1";
  mesh.scale_rank(5, 0.5);
  auto culprits = locate(mesh);
  ASSERT_EQ(culprits.size(), 1U) << listed(culprits);
  EXPECT_EQ(culprits.front().name, "rank 5");
  for (Node& node : mesh.nodes) node.host.clear();
  culprits = locate(mesh);
  ASSERT_EQ(culprits.size(), 1U) << listed(culprits);
  EXPECT_EQ(culprits.front().name, "rank 5");
}

TEST(MeshCulprits, BadNicOfAHostWithTwo) {
  Mesh mesh = make_mesh(4, 2);
  mesh.scale_rank(5, 0.45);  // node03's second NIC
  const auto culprits = locate(mesh);
  ASSERT_EQ(culprits.size(), 1U) << listed(culprits);
  const Culprit& nic = culprits.front();
  EXPECT_EQ(nic.kind, CulpritKind::nic);
  EXPECT_EQ(nic.name, "node03/mlx5_1 (rank 5)");
  EXPECT_EQ(nic.ranks, std::vector<int>{5});
  EXPECT_EQ(nic.low, 12U);  // to and from the 6 ranks of the other hosts
  EXPECT_EQ(nic.total, 12U);
  EXPECT_EQ(nic.next, "check mlx5_1 on node03");
}

TEST(MeshCulprits, BothNicsLowIsTheNode) {
  Mesh mesh = make_mesh(4, 2);
  mesh.scale_rank(4, 0.45);
  mesh.scale_rank(5, 0.45);
  const auto culprits = locate(mesh);
  ASSERT_EQ(culprits.size(), 1U) << listed(culprits);
  EXPECT_EQ(culprits.front().kind, CulpritKind::node);
  EXPECT_EQ(culprits.front().name, "node03");
  EXPECT_EQ(culprits.front().ranks, (std::vector<int>{4, 5}));
}

TEST(MeshCulprits, BadLinkBothWays) {
  Mesh mesh = make_mesh(8, 1);
  mesh.scale(2, 6, 0.6);
  mesh.scale(6, 2, 0.6);
  const auto culprits = locate(mesh);
  ASSERT_EQ(culprits.size(), 1U) << listed(culprits);
  const Culprit& link = culprits.front();
  EXPECT_EQ(link.kind, CulpritKind::link);
  EXPECT_EQ(link.name, "node03 <-> node07");
  EXPECT_EQ(link.ranks, (std::vector<int>{2, 6}));
  EXPECT_EQ(link.low, 2U);
  EXPECT_EQ(link.total, 2U);
  EXPECT_EQ(link.next, "check the cable/ports between node03 and node07");
}

TEST(MeshCulprits, OneDirectionIsALinkOnlyWhenFarBelow) {
  Mesh mesh = make_mesh(8, 1);
  mesh.scale(2, 6, 0.75);  // low, but within what noise and a busy round can do
  EXPECT_TRUE(locate(mesh).empty()) << listed(locate(mesh));
  mesh.scale(2, 6, 0.5);  // now some 0.37 x median
  const auto culprits = locate(mesh);
  ASSERT_EQ(culprits.size(), 1U) << listed(culprits);
  EXPECT_EQ(culprits.front().kind, CulpritKind::link);
  EXPECT_EQ(culprits.front().low, 1U);
}

TEST(MeshCulprits, LinkBetweenTwoNicsOfHostsWithSeveral) {
  Mesh mesh = make_mesh(4, 2);
  mesh.scale(1, 6, 0.5);
  mesh.scale(6, 1, 0.5);
  const auto culprits = locate(mesh);
  ASSERT_EQ(culprits.size(), 1U) << listed(culprits);
  EXPECT_EQ(culprits.front().kind, CulpritKind::link);
  EXPECT_EQ(culprits.front().name, "node01/mlx5_1 (rank 1) <-> node04/mlx5_0 (rank 6)");
}

TEST(MeshCulprits, NodeAndLinkAtOnce) {
  Mesh mesh = make_mesh(8, 1);
  mesh.scale_rank(1, 0.4);
  mesh.scale(4, 6, 0.6);
  mesh.scale(6, 4, 0.6);
  const auto culprits = locate(mesh);
  ASSERT_EQ(culprits.size(), 2U) << listed(culprits);
  EXPECT_EQ(culprits[0].kind, CulpritKind::node);  // 14 directions: more certain than 2
  EXPECT_EQ(culprits[0].name, "node02");
  EXPECT_EQ(culprits[1].kind, CulpritKind::link);
  EXPECT_EQ(culprits[1].name, "node05 <-> node07");
}

TEST(MeshCulprits, BadLeafUplinks) {
  Mesh mesh = make_mesh(12, 1);
  const Topology topology = make_topology(12, 3);
  for (int inside = 4; inside < 8; ++inside) {  // leaf2
    for (int outside = 0; outside < 12; ++outside) {
      if (outside >= 4 && outside < 8) continue;
      mesh.scale(inside, outside, 0.5);
      mesh.scale(outside, inside, 0.5);
    }
  }
  const auto culprits = locate(mesh, &topology);
  ASSERT_EQ(culprits.size(), 1U) << listed(culprits);
  const Culprit& leaf = culprits.front();
  EXPECT_EQ(leaf.kind, CulpritKind::switch_uplinks);
  EXPECT_EQ(leaf.name, "leaf2");
  EXPECT_EQ(leaf.ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(leaf.low, 64U);
  EXPECT_EQ(leaf.total, 64U);
  EXPECT_NE(leaf.evidence.find("crossing: 64/64 (1.00"), std::string::npos) << leaf.evidence;
  EXPECT_NE(leaf.evidence.find("inside: 0/12 (0.00)"), std::string::npos) << leaf.evidence;
  EXPECT_EQ(leaf.next, "check leaf2's uplink ports and counters");
  // Without the topology, each of leaf2's hosts looks like a bad node.
  const auto without = locate(mesh);
  EXPECT_EQ(without.size(), 4U) << listed(without);
}

TEST(MeshCulprits, TwoLeavesCannotBeToldApart) {
  Mesh mesh = make_mesh(8, 1);
  const Topology topology = make_topology(8, 2);
  for (int a = 0; a < 4; ++a) {
    for (int b = 4; b < 8; ++b) {
      mesh.scale(a, b, 0.5);
      mesh.scale(b, a, 0.5);
    }
  }
  // More than half the directions cross, so the matrix's own median is a low figure: only
  // against a reference (the first pass's, or a known-good run's) are they low.
  EXPECT_TRUE(locate(mesh, &topology).empty());
  const auto culprits = locate(mesh, &topology, JudgeSettings{Rule::median, default_bw_threshold, 100.0});
  ASSERT_EQ(culprits.size(), 1U) << listed(culprits);
  EXPECT_EQ(culprits.front().kind, CulpritKind::switch_uplinks);
  EXPECT_NE(culprits.front().evidence.find("looks the same"), std::string::npos) << culprits.front().evidence;
  EXPECT_LT(culprits.front().confidence, 0.5);
}

TEST(MeshCulprits, BadNodeUnderALeafIsNoSwitch) {
  Mesh mesh = make_mesh(8, 1);
  const Topology topology = make_topology(8, 4);  // two hosts a leaf
  mesh.scale_rank(2, 0.4);
  const auto culprits = locate(mesh, &topology);
  ASSERT_EQ(culprits.size(), 1U) << listed(culprits);
  EXPECT_EQ(culprits.front().kind, CulpritKind::node);
  EXPECT_EQ(culprits.front().name, "node03");
}

TEST(MeshCulprits, FailedDirectionsGroupedByCause) {
  Mesh mesh = make_mesh(8, 1);
  for (int other = 0; other < 7; ++other) {
    mesh.fail(7, other, "netdev_without_rdma");
    mesh.fail(other, 7, "netdev_without_rdma");
  }
  mesh.fail(1, 2, "");  // no cause: left to the other rules, which make it a link
  const auto culprits = locate(mesh);
  ASSERT_EQ(culprits.size(), 2U) << listed(culprits);
  EXPECT_EQ(culprits[1].kind, CulpritKind::link);
  EXPECT_EQ(culprits[1].name, "node02 <-> node03");
  const Culprit& cause = culprits.front();
  EXPECT_EQ(cause.kind, CulpritKind::cause);
  EXPECT_EQ(cause.name, "netdev_without_rdma");
  EXPECT_EQ(cause.ranks, std::vector<int>{7});
  EXPECT_EQ(cause.low, 14U);
  EXPECT_EQ(cause.total, 14U);
  EXPECT_FALSE(cause.median_ratio.has_value());
  EXPECT_EQ(cause.evidence, "14 of 14 directions of rank 7 failed with netdev_without_rdma (host node08)");
  EXPECT_EQ(cause.next, "run diag-bind on node08 and fix what it reports (netdev_without_rdma)");
}

// Three ranks in one guest, the third unable to take part: half of each healthy rank's
// directions fail too, but the cause is the third's own (its bind diagnosis says so).
TEST(MeshCulprits, CauseNamesTheRankThatDiagnosedIt) {
  Mesh mesh = make_mesh(3, 1);
  for (auto& node : mesh.nodes) node.host = "rxevm";
  mesh.nodes[2].verdict = {{"cause", "netdev_without_rdma"}};
  for (int other = 0; other < 2; ++other) {
    mesh.fail(2, other, "netdev_without_rdma");
    mesh.fail(other, 2, "netdev_without_rdma");
  }
  const auto culprits = locate(mesh);
  ASSERT_FALSE(culprits.empty());
  EXPECT_EQ(culprits.front().ranks, std::vector<int>{2}) << listed(culprits);
  EXPECT_EQ(culprits.front().evidence, "4 of 4 directions of rank 2 failed with netdev_without_rdma (host rxevm)");
}

TEST(MeshCulprits, CauseOnScatteredPairsNamesTheirEnds) {
  Mesh mesh = make_mesh(8, 1);
  mesh.fail(0, 1, "route_missing");
  mesh.fail(4, 5, "route_missing");
  const auto culprits = locate(mesh);
  ASSERT_EQ(culprits.size(), 1U) << listed(culprits);
  EXPECT_EQ(culprits.front().ranks, (std::vector<int>{0, 1, 4, 5}));
  EXPECT_EQ(culprits.front().low, 2U);
}

TEST(MeshCulprits, LatencyHigherIsWorse) {
  Mesh mesh = make_mesh(8, 1, Better::lower, 3.0);
  const JudgeSettings judge{Rule::median, default_time_threshold, std::nullopt};
  EXPECT_TRUE(locate(mesh, nullptr, judge).empty());
  mesh.scale_rank(6, 5.0);
  const auto culprits = locate(mesh, nullptr, judge);
  ASSERT_EQ(culprits.size(), 1U) << listed(culprits);
  EXPECT_EQ(culprits.front().kind, CulpritKind::node);
  EXPECT_EQ(culprits.front().name, "node07");
  ASSERT_TRUE(culprits.front().median_ratio.has_value());
  EXPECT_NEAR(*culprits.front().median_ratio, 5.0, 0.3);
}

TEST(MeshCulprits, ClusterKitRuleAgainstTheBest) {
  const JudgeSettings clusterkit{Rule::clusterkit, 0, std::nullopt};
  // +-5% noise puts about a quarter of the directions under 0.93 x the maximum ...
  const Mesh noisy = make_mesh(16, 1);
  const std::vector<bool> bad = bad_cells(noisy.matrix, clusterkit);
  EXPECT_GT(std::ranges::count(bad, true), 30);
  // ... but scattered, so they name no link (both ends are not fine elsewhere) and no node.
  EXPECT_TRUE(locate(noisy, nullptr, clusterkit).empty()) << listed(locate(noisy, nullptr, clusterkit));

  Mesh mesh = make_mesh(8, 1);
  mesh.scale_rank(2, 0.5);
  const auto culprits = locate(mesh, nullptr, clusterkit);
  ASSERT_EQ(culprits.size(), 1U) << listed(culprits);
  EXPECT_EQ(culprits.front().name, "node03");
  ASSERT_TRUE(culprits.front().median_ratio.has_value());  // against the bar, 0.93 x the maximum
  EXPECT_NEAR(*culprits.front().median_ratio, 0.5 / 0.93, 0.05);
  EXPECT_NE(culprits.front().evidence.find("x bar"), std::string::npos);

  Mesh lat = make_mesh(8, 1, Better::lower, 3.0);
  lat.scale_rank(4, 3.0);  // above 2.1 x the minimum
  const auto slow = locate(lat, nullptr, clusterkit);
  ASSERT_EQ(slow.size(), 1U) << listed(slow);
  EXPECT_EQ(slow.front().name, "node05");
}

TEST(MeshCulprits, LargeMeshWithLeaves) {
  // 256 ranks, 64 hosts of 4 NICs, 8 leaves: a bad node, a bad NIC and a bad leaf's uplinks.
  Mesh mesh = make_mesh(64, 4);
  const Topology topology = make_topology(64, 8);
  mesh.scale_rank(9, 0.5);                                            // node03's second NIC
  for (int rank = 40; rank < 44; ++rank) mesh.scale_rank(rank, 0.5);  // node11
  for (int inside = 192; inside < 224; ++inside) {                    // leaf7: node49-node56
    for (int outside = 0; outside < 256; ++outside) {
      if (outside >= 192 && outside < 224) continue;
      mesh.scale(inside, outside, 0.6);
      mesh.scale(outside, inside, 0.6);
    }
  }
  const auto culprits = locate(mesh, &topology);
  ASSERT_EQ(culprits.size(), 3U) << listed(culprits);
  std::vector<std::string> names;
  for (const Culprit& culprit : culprits) names.push_back(culprit.name);
  std::ranges::sort(names);
  EXPECT_EQ(names, (std::vector<std::string>{"leaf7", "node03/mlx5_1 (rank 9)", "node11"}));
}

}  // namespace
}  // namespace rdmakit::mesh
