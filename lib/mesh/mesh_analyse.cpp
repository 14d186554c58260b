#include "lib/mesh/mesh_analyse.hpp"

#include <cstddef>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"
#include "lib/mesh/mesh_report_read.hpp"

namespace rdmakit::mesh {

namespace {

// A few names and a count, for a line that stays one line at any cluster size.
std::string some_of(const std::vector<std::string>& names) {
  constexpr std::size_t shown = 5;
  const std::vector<std::string> first(names.begin(),
                                       names.begin() + static_cast<std::ptrdiff_t>(std::min(names.size(), shown)));
  return fmt::format("{}{}", fmt::join(first, ", "),
                     names.size() > shown ? fmt::format(" and {} more", names.size() - shown) : "");
}

// The saved run's arguments (what it measured and how), with this run's own over them: the
// report, the rule, the topology, the thresholds in force and how the report is written.
nlohmann::json judged_arguments(nlohmann::json saved, const nlohmann::json& now, const MeshResults& results) {
  if (!saved.is_object() || saved.empty()) return now;
  for (const auto* key :
       {"analyse", "topology", "rule", "json", "json_file", "log_level", "debug", "quiet", "timeout_s", "progress"}) {
    if (now.contains(key)) saved[key] = now[key];
  }
  saved["threshold"] = results.bw_analysis.threshold;
  saved["lat_threshold"] = results.time_analysis.threshold;
  // Keys this version's runs have that an older report's lack: as this run's defaults.
  for (const auto& [key, value] : now.items()) {
    if (!saved.contains(key)) saved[key] = value;
  }
  return saved;
}

}  // namespace

std::optional<std::string> topology_mismatch(const Topology& topology, const std::vector<Node>& nodes) {
  std::set<std::string> hosts;
  for (const auto& node : nodes) {
    if (!node.host.empty()) hosts.insert(node.host);
  }
  std::vector<std::string> unplaced;
  for (const auto& host : hosts) {
    if (topology.leaf_of(host).empty()) unplaced.push_back(host);
  }
  std::size_t absent = 0;
  for (const auto& [host, leaf] : topology.leaf_of_host) absent += hosts.contains(host) ? 0 : 1;
  if (unplaced.empty()) return std::nullopt;
  return fmt::format(
      "--topology {}: {} of the mesh's {} hosts are not in it ({}); switches are judged without them ({} of its "
      "hosts are not in the mesh)",
      topology.origin, unplaced.size(), hosts.size(), some_of(unplaced), absent);
}

void analyse_saved_mesh(const AnalyseSettings& settings, Report& report, MeshResults& results) {
  std::ifstream file(settings.report_file, std::ios::binary);
  if (!file) throw UsageError(fmt::format("--analyse {}: cannot read it", settings.report_file));
  auto saved = read_mesh_report(file, settings.report_file);
  results.analysed_from = settings.report_file;
  results.ranks = saved.table.ranks;
  results.nodes = saved.table.nodes;
  results.rounds = saved.rounds;
  results.rounds_completed = saved.rounds_completed;
  results.finished = saved.finished;
  for (const auto& matrix : saved.table.tests)
    results.tests.push_back(test_named(matrix.test).value());  // the reader took bw, lat, cm only
  results.table = std::move(saved.table);
  results.rule = settings.rule;
  results.bw_analysis.threshold =
      settings.bw_threshold.value_or(saved.arguments.value("threshold", default_bw_threshold));
  results.time_analysis.threshold =
      settings.time_threshold.value_or(saved.arguments.value("lat_threshold", default_time_threshold));
  report.arguments = judged_arguments(saved.arguments, report.arguments, results);
  results.topology = settings.topology;
  results.siblings = report.siblings;
  if (results.topology) {
    if (const auto mismatch = topology_mismatch(*results.topology, results.nodes)) {
      spdlog::warn("{}", *mismatch);
      results.warnings.push_back(*mismatch);
    }
  }
  results.analyse();
  conclude(results, report, true);
}

}  // namespace rdmakit::mesh
