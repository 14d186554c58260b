#pragma once
// What rdma_pingmesh tells monitoring: every path's counters, its last window and its state
// as metric families (OpenMetrics or Prometheus text: the /metrics endpoint and the
// node_exporter textfile), and one JSON
// line per window and per state change (--json). Metric and label names follow Prometheus'
// conventions: the unit in the name, counters' samples ending in _total.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "lib/net/openmetrics.hpp"
#include "lib/pingmesh/pinglist.hpp"
#include "lib/pingmesh/pingmesh_path.hpp"

namespace rdmakit::pingmesh {

// One path as the report shows it: its totals since the start, its last window, its state.
struct PathSnapshot {
  Peer peer;
  bool same_leaf = true;
  std::uint64_t sent_total = 0;
  std::uint64_t answered_total = 0;
  std::uint64_t lost_total = 0;
  std::uint64_t late_total = 0;
  std::uint64_t unexpected_total = 0;
  std::uint64_t state_changes_total = 0;
  std::uint64_t device_samples_total = 0;  // round trips taken on the devices' clocks
  std::uint64_t stamps_missing_total = 0;
  WindowFigures last_window;
  Verdict verdict;
};

struct NodeSnapshot {
  std::string node;     // this node's name (the pinglist's, or the host name)
  std::string address;  // the address it probes from
  // Whose clock stamps this node's completions: "device", "host-completions" (--host-stamps),
  // or "software" (nobody's: round trips on the hosts' clocks).
  std::string clock = "software";
  double window_s = 10;
  std::vector<PathSnapshot> paths;
  bool node_at_fault = false;  // every path went bad in the last window: this node's NIC or link
  // Datagrams not answered nor taken, by why: ProbeDecode's names and "unknown_peer".
  std::map<std::string, std::uint64_t> ignored;
  double cpu_seconds = 0;  // this process's user and system time
};

// The metric families of `node`, for /metrics and, in the Prometheus text format, the
// node_exporter textfile.
std::vector<openmetrics::Family> metrics_families(const NodeSnapshot& node);
// The families as the node_exporter textfile has them: process_cpu_seconds is node_exporter's
// own there (its process collector), and a second family of that name, with other help,
// fails every scrape of node_exporter ("error gathering metrics"); ours is
// rdmakit_pingmesh_cpu_seconds in the textfile.
std::vector<openmetrics::Family> textfile_families(std::vector<openmetrics::Family> families);

// A window's JSON line: {"event": "window", "time": UNIX_SECONDS, "node", "peer", "address",
// "sent", "answered", "lost", "late", "unexpected", "loss_ratio", "rtt_us": {p50, p99, max},
// "responder_delay_us": {p50}, "rtt_device_samples", "stamps_missing", "state", "why"}
// (doc/schema/rdma_pingmesh.schema.json).
nlohmann::json window_line(const NodeSnapshot& node, const PathSnapshot& path, double unix_seconds);
// One path in the run's report: {"peer", "address", "same_leaf", "sent", "answered", "lost",
// "late", "unexpected", "rtt_device_samples", "stamps_missing", "state_changes", "state",
// "why"}, its totals since the start.
nlohmann::json path_totals(const PathSnapshot& path);
// A state change's JSON line: {"event": "state", "time", "node", "peer", "address", "from",
// "to", "why"}; for the node itself (every path bad) "peer" and "address" are null.
nlohmann::json state_line(const NodeSnapshot& node, const PathSnapshot* path, PathState from, PathState to,
                          const std::string& why, double unix_seconds);

}  // namespace rdmakit::pingmesh
