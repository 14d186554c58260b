#pragma once
// rdma_mesh --analyse: a saved report judged again (other thresholds, ClusterKit's rule, a
// topology) without MPI or a device, into the same report and text as a live run.

#include <optional>
#include <string>

#include "lib/base/report.hpp"
#include "lib/mesh/rdma_mesh_session.hpp"

namespace rdmakit::mesh {

struct AnalyseSettings {
  std::string report_file;
  std::optional<Topology> topology;
  Rule rule = Rule::median;
  // Given on the command line; none: the saved run's own (its arguments), else the defaults.
  std::optional<double> bw_threshold;
  std::optional<double> time_threshold;
};

// Reads settings.report_file (UsageError when it cannot be read or is not a mesh report),
// fills `results` as the live run would have and judges it; the report's exit code and
// outcome as a live run's (1 for a failed direction or an outlier), and its arguments the
// saved run's (what was measured, and how) with this run's judging ones over them.
void analyse_saved_mesh(const AnalyseSettings& settings, Report& report, MeshResults& results);

// The hosts of `nodes` that `topology` does not place, and the count of hosts it places that
// are not among them: the warning --topology gives before it goes on.
std::optional<std::string> topology_mismatch(const Topology& topology, const std::vector<Node>& nodes);

}  // namespace rdmakit::mesh
