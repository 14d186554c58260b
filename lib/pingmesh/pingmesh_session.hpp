#pragma once
// rdma_pingmesh's session: one UD QP (lib/rdma/datagram_port) answers every peer of the
// pinglist and probes this node's targets (lib/pingmesh/pinglist) at their rates, jittered;
// every window each path's figures and state (lib/pingmesh/pingmesh_path) go out as JSON
// lines, OpenMetrics text (lib/pingmesh/pingmesh_report) and one log line a state change.
// The loop sleeps between probes on the completion and CM channels together; it runs until
// Ctrl-C or SIGTERM (a service's stop, not a failure) or --duration.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/report.hpp"
#include "lib/tool/cli.hpp"

namespace rdmakit {

struct PingmeshOptions {
  std::string pinglist;   // --pinglist FILE: "ADDRESS [NAME]" a line
  std::string topology;   // --topology FILE: Slurm's topology.conf, or "host switch" lines
  std::string node_name;  // --name: this node's name in the pinglist and topology (the host name)
  std::string bind;       // --bind: the address probed from (this node's pinglist address)
  std::uint16_t port = 7474;
  double rate_per_s = 10;        // each target under this node's leaf (every target without a topology)
  double rate_across_per_s = 1;  // each sampled target under another leaf
  std::size_t sample_per_leaf = 2;
  double rate_cap_per_s = 1000;  // every target together
  double window_s = 10;
  double answer_timeout_s = 1;             // an answer later than this counts the probe lost
  double loss_percent = 1;                 // lossy above this
  double slow_factor = 3;                  // slow: a window's p99 above this times the learned baseline
  double p99_limit_ms = 0;                 // slow: above this fixed p99 instead (0: learned)
  double duration_s = 0;                   // 0: until stopped
  bool answer_any = false;                 // answer datagrams from peers outside the pinglist too
  bool host_stamps = false;                // the host's clock stamps completions where the device's does not
  std::string prom_file;                   // node_exporter's textfile, rewritten atomically every window
  std::string metrics;                     // [ADDRESS:]PORT of a /metrics endpoint (default address 127.0.0.1)
  std::vector<std::string> metrics_allow;  // CIDRs that may scrape it (default: the address' subnets)

  void add_to(ToolRunner& tool);
  // Throws UsageError for what cannot work; no RDMA needed.
  void check() const;
};

// diag-connect's diagnosis of the path to `address` (the app has diag-bind beside it run
// it), bounded by `timeout` and given up at once when `cancel_fd` becomes readable (the run
// ends); its verdict in words in `text`.
using PathDiagnoser = std::function<nlohmann::json(const std::string& address, std::chrono::milliseconds timeout,
                                                   int cancel_fd, std::string& text)>;

// `program`: the tool's name as installed, for the state-change lines. `diagnose` runs on a
// thread of its own when a path goes bad, once at a time and at most once in ten minutes a
// peer; none: no diagnosis.
void run_pingmesh(const PingmeshOptions& options, const CommonOptions& common, const std::string& program,
                  const PathDiagnoser& diagnose, Report& report);

}  // namespace rdmakit
