#pragma once
// rdma_mesh's command line: send_bw's measurement flags (the subset the mesh measures with,
// lib/send_bw/bw_options) and the mesh's own, bound to MeshSettings (whose defaults are
// theirs); the checks made before the job runs, and those that need its size.

#include <string>
#include <vector>

#include "lib/base/cli_declarations.hpp"
#include "lib/mesh/mesh_analyse.hpp"
#include "lib/mesh/rdma_mesh_session.hpp"
#include "lib/send_bw/bw_options.hpp"
#include "lib/tool/cli.hpp"
#include "lib/tool/progress.hpp"

namespace rdmakit::mesh {

struct MeshOptions {
  MeshSettings settings;
  MeasureFlags measure;
  std::string bind;
  std::string netdev;
  std::vector<std::string> tests;  // --test as typed; none: settings.tests
  std::string pairs_file;
  ProgressOptions progress;
  std::string analyse_file;   // --analyse: judge this saved report instead of measuring
  std::string topology_file;  // --topology; none: Slurm's topology.conf under Slurm
  std::string rule = "median";
  // Whether --threshold and --lat-threshold were given: --analyse keeps the saved run's otherwise.
  const CLI::Option* threshold_option = nullptr;
  const CLI::Option* lat_threshold_option = nullptr;
  std::vector<const CLI::Option*> measuring;  // the options --analyse refuses

  void add_to(CLI::App& app);
  // Before the job runs (UsageError): what needs no other rank. Reads --pairs' file.
  void validate() const;
  // Once the job runs: the settings for `ranks` ranks (the ports and --pairs' ranks checked
  // against them), every wait bounded by `common`'s timeout and `stop_fd`.
  MeshSettings settings_for(int ranks, const CommonOptions& common, int stop_fd) const;
  // --analyse's settings: the report, the rule, the thresholds and the topology (read here).
  AnalyseSettings analyse_settings() const;
};

}  // namespace rdmakit::mesh
