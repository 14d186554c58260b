#pragma once
// What a mesh's bad directions point at: a node, one NIC of a node, a link (one pair), a
// switch's uplinks, or a diagnosed cause shared by failed directions, each with its evidence.
// Pure: the matrices (lib/mesh/mesh_matrix), the ranks' hosts and devices, and optionally
// the topology (lib/topology/topology) in; culprits out. doc/mesh.md and rdma_mesh(1) state
// the rules.

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/base/sibling_names.hpp"
#include "lib/mesh/mesh_matrix.hpp"
#include "lib/topology/topology.hpp"

namespace rdmakit::mesh {

// How a direction is judged bad.
//   median: below threshold x the (first pass's) median for bandwidth, above it for times
//           (rdma_mesh's own; --threshold 0.8, --lat-threshold 2 by default);
//   clusterkit: ClusterKit's: bandwidth below 0.93 x the maximum, a time above 2.1 x the minimum.
enum class Rule { median, clusterkit };
inline constexpr std::array<std::string_view, 2> rule_names{"median", "clusterkit"};
std::string_view to_string(Rule rule);

inline constexpr double clusterkit_bw_fraction = 0.93;
inline constexpr double clusterkit_time_factor = 2.1;

struct JudgeSettings {
  Rule rule = Rule::median;
  double threshold = default_bw_threshold;  // median rule only: the factor (0.8 for bw, 2 for times)
  // The median the median rule judges against (the first pass's); none: the matrix's own.
  std::optional<double> reference_median;
};

// Per cell of `matrix`: whether it is bad (failed, or a figure the rule rejects). Cells not
// measured are never bad.
std::vector<bool> bad_cells(const TestMatrix& matrix, const JudgeSettings& settings);

enum class CulpritKind { node, nic, link, switch_uplinks, cause };
inline constexpr std::array<std::string_view, 5> culprit_kind_names{"node", "nic", "link", "switch", "cause"};
std::string_view to_string(CulpritKind kind);

struct Culprit {
  CulpritKind kind = CulpritKind::node;
  std::string name;        // the host; "host/device (rank r)"; "hostA <-> hostB"; the switch; the cause code
  std::vector<int> ranks;  // the ranks it covers, ascending
  std::size_t low = 0;     // its directions judged bad ...
  std::size_t total = 0;   // ... of its directions measured or failed
  // The median over its bad directions that have a figure of figure / reference (the
  // reference median, or the rule's bar for clusterkit); none when all of them failed.
  std::optional<double> median_ratio;
  double confidence = 0;  // 0..1: how clearly the evidence separates it from the rest
  std::string evidence;   // one line a person reads: "38 of 40 directions low (0.41 x median), ..."
  std::string next;       // what to check next, with the real names filled in
};

struct LocateSettings {
  JudgeSettings judge;
  const Topology* topology = nullptr;  // none: localization stops at node, NIC and link
  SiblingNames siblings;               // how next steps name diag-bind
};

// The culprits of one test, most certain first. A direction a culprit explains is not used
// again as evidence for a smaller one (a bad node's directions do not also make links).
std::vector<Culprit> locate_culprits(const TestMatrix& matrix, const std::vector<Node>& nodes,
                                     const LocateSettings& settings);

}  // namespace rdmakit::mesh
