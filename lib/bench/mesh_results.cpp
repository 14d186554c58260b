// rdma_mesh's report section: the JSON document and the text a person reads (a matrix per
// test, the spread, the slowest pairs, outliers, node problems and failures).

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/bench/rdma_mesh_session.hpp"

namespace rdmakit::mesh {

namespace {

std::string_view unit_of(Test test) {
  switch (test) {
    case Test::bandwidth: return "MiB/s";
    case Test::latency: return "us";
    case Test::connect: return "ms";
  }
  return "";
}

std::string_view figure_name(Test test) {
  switch (test) {
    case Test::bandwidth: return "average bandwidth";
    case Test::latency: return "median latency";
    case Test::connect: return "median connection set-up (resolve, route, connect)";
  }
  return "";
}

// The directions of an analysis, one per sample.
std::vector<const Direction*> directions_of(const MeshResults& results, const TestAnalysis& judged) {
  std::vector<const Direction*> found;
  for (const auto index : judged.directions) found.push_back(&results.directions[index]);
  return found;
}

nlohmann::json optional_number(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json();
}

nlohmann::json direction_json(const Direction& d, bool outlier) {
  auto item = to_json(d.first);
  item["source"] = d.source;
  item["destination"] = d.destination;
  item["test"] = to_string(d.test);
  item["unit"] = unit_of(d.test);
  item["round"] = d.round;
  item["cause"] = d.cause.empty() ? nlohmann::json() : nlohmann::json(d.cause);
  item["outlier"] = outlier;
  item["final_outcome"] = to_string(d.last().outcome);
  item["final_figure"] = optional_number(d.last().figure);
  item["retests"] = nlohmann::json::array();
  for (const auto& retest : d.retests) item["retests"].push_back(to_json(retest));
  return item;
}

std::string host_of(const MeshResults& results, int rank) {
  return rank < static_cast<int>(results.nodes.size()) ? results.nodes[rank].host : std::string();
}

nlohmann::json summary_json(const MeshResults& results, Test test, const TestAnalysis& judged) {
  const auto& analysis = judged.analysis;
  const auto of_test = directions_of(results, judged);
  nlohmann::json summary = {{"unit", unit_of(test)},
                            {"figure", figure_name(test)},
                            {"measured", analysis.measured},
                            {"failed", analysis.failed},
                            {"min", optional_number(analysis.min)},
                            {"median", optional_number(analysis.median)},
                            {"first_pass_median", optional_number(judged.first_pass_median)},
                            {"max", optional_number(analysis.max)},
                            {"threshold", results.analysis_settings(test).threshold},
                            {"slowest", nlohmann::json::array()},
                            {"outliers", nlohmann::json::array()},
                            {"node_problems", nlohmann::json::array()}};
  for (const auto index : analysis.slowest) {
    const auto& d = *of_test[index];
    summary["slowest"].push_back({{"source", d.source}, {"destination", d.destination}, {"figure", *d.last().figure}});
  }
  for (const auto& outlier : analysis.outliers) {
    const auto& d = *of_test[outlier.sample];
    summary["outliers"].push_back({{"source", d.source},
                                   {"destination", d.destination},
                                   {"figure", *d.last().figure},
                                   {"first_figure", optional_number(d.first.figure)},
                                   {"ratio", outlier.ratio}});
  }
  for (const auto& problem : analysis.node_problems) {
    summary["node_problems"].push_back(
        {{"rank", problem.rank}, {"host", host_of(results, problem.rank)}, {"links", problem.links}});
  }
  return summary;
}

std::string cell(const Direction& d, bool outlier) {
  const auto& last = d.last();
  if (!last.figure) return "FAIL";
  return fmt::format("{}{:.4g}", outlier ? "*" : "", *last.figure);
}

std::string matrix_text(const MeshResults& results, Test test, const std::vector<bool>& outliers) {
  std::map<std::pair<int, int>, std::string> by_pair;
  for (std::size_t i = 0; i < results.directions.size(); ++i) {
    const auto& d = results.directions[i];
    if (d.test == test) by_pair[{d.source, d.destination}] = cell(d, outliers[i]);
  }
  std::string out = fmt::format("{:>6}", "src\\dst");
  for (int column = 0; column < results.ranks; ++column) out += fmt::format(" {:>9}", column);
  out += "\n";
  for (int row = 0; row < results.ranks; ++row) {
    out += fmt::format("{:>7}", row);
    for (int column = 0; column < results.ranks; ++column) {
      const auto found = by_pair.find({row, column});
      out += fmt::format(" {:>9}", row == column ? "-" : found == by_pair.end() ? "" : found->second);
    }
    out += "\n";
  }
  return out;
}

std::string pair_name(const Direction& d) {
  return fmt::format("{}->{}", d.source, d.destination);
}

std::string findings_text(const MeshResults& results, Test test, const TestAnalysis& judged) {
  const auto of_test = directions_of(results, judged);
  const auto& analysis = judged.analysis;
  const auto unit = unit_of(test);
  std::string out;
  if (analysis.median) {
    out += fmt::format("{}: min {:.4g}  median {:.4g}  max {:.4g} {}; {} measured, {} failed\n", to_string(test),
                       *analysis.min, *analysis.median, *analysis.max, unit, analysis.measured, analysis.failed);
  } else {
    out += fmt::format("{}: nothing measured; {} failed\n", to_string(test), analysis.failed);
  }
  std::string slowest;
  for (const auto index : analysis.slowest) {
    slowest += fmt::format(" {} {:.4g}", pair_name(*of_test[index]), *of_test[index]->last().figure);
  }
  if (!slowest.empty()) out += "slowest:" + slowest + "\n";
  const auto& settings = results.analysis_settings(test);
  for (const auto& outlier : analysis.outliers) {
    const auto& d = *of_test[outlier.sample];
    std::string history = d.retests.empty() ? "" : fmt::format(" (first {:.4g}, retested)", d.first.figure.value_or(0));
    out +=
        fmt::format("outlier: {} {:.4g} {} = {:.2f} x median ({} {} x){}\n", pair_name(d), *d.last().figure, unit,
                    outlier.ratio, settings.better == Better::higher ? "below" : "above", settings.threshold, history);
  }
  for (const auto& problem : analysis.node_problems) {
    out += fmt::format("node problem: rank {} ({}): all {} of its links are outliers or failed\n", problem.rank,
                       host_of(results, problem.rank), problem.links);
  }
  for (const auto* d : of_test) {
    if (d->last().figure) continue;
    const auto message = d->last().error.is_object() ? d->last().error.value("message", std::string()) : "";
    out += fmt::format("failed: {}: {}\n", pair_name(*d), message);
  }
  return out;
}

// "3 RoCE v2": the GID's index and type, "-" when not known.
std::string gid_column(const Node& node) {
  if (node.gid_type.empty()) return "-";
  return node.gid_index < 0 ? node.gid_type : fmt::format("{} {}", node.gid_index, node.gid_type);
}

std::string nodes_text(const MeshResults& results) {
  std::string out = "rank  host             address          device   port  mtu   gid         state  address from\n";
  for (const auto& node : results.nodes) {
    out += fmt::format("{:<5} {:<16} {:<16} {:<8} {:<5} {:<5} {:<11} {:<6} {}\n", node.rank, node.host,
                       node.address.empty() ? "-" : node.address, node.device.empty() ? "-" : node.device, node.port,
                       node.mtu, gid_column(node),
                       node.usable ? "ok" : node.verdict.value("cause", std::string("unusable")), node.address_choice);
  }
  for (const auto& line : mixed_fabric(results.nodes)) out += "warning: " + line + "\n";
  return out;
}

// Per pass: {pairs, rounds: [[[low, high], ...], ...]}.
nlohmann::json retest_passes_json(const std::vector<std::vector<Round>>& passes) {
  auto all = nlohmann::json::array();
  for (const auto& pass : passes) {
    nlohmann::json rounds = nlohmann::json::array();
    std::size_t pairs = 0;
    for (const auto& round : pass) {
      nlohmann::json listed = nlohmann::json::array();
      for (const auto& pair : round) listed.push_back({pair.low, pair.high});
      pairs += round.size();
      rounds.push_back(std::move(listed));
    }
    all.push_back({{"pairs", pairs}, {"rounds", std::move(rounds)}});
  }
  return all;
}

// What the plan left unmeasured, and what the retests did: for a reader of a --quick or
// --pairs run, and of one whose retests ran.
std::string coverage_text(const MeshResults& results) {
  std::set<std::pair<int, int>> pairs;
  for (const auto& d : results.directions) pairs.insert(std::minmax(d.source, d.destination));
  const auto all = static_cast<std::size_t>(results.ranks) * static_cast<std::size_t>(results.ranks - 1) / 2;
  std::string out;
  if (results.ranks > 1 && pairs.size() < all) {
    out += fmt::format("coverage: {} of {} pairs measured", pairs.size(), all);
    if (!results.left_out.empty()) out += fmt::format("; in no pair: rank {}", fmt::join(results.left_out, ", "));
    out += "\n";
  }
  if (results.retest_passes.empty()) return out;
  std::string passes;
  for (const auto& pass : results.retest_passes) {
    std::size_t count = 0;
    for (const auto& round : pass) count += round.size();
    passes += fmt::format("{}{} pair(s) in {} round(s)", passes.empty() ? "" : ", then ", count, pass.size());
  }
  return out + fmt::format("retests: {}; ended: {}\n", passes, to_string(results.retests_ended));
}

}  // namespace

void MeshResults::analyse() {
  analyses.clear();
  for (const auto test : tests) {
    TestAnalysis judged{.test = test, .directions = {}, .first_pass_median = std::nullopt, .analysis = {}};
    std::vector<Sample> first;
    std::vector<Sample> last;
    for (std::size_t i = 0; i < directions.size(); ++i) {
      const auto& d = directions[i];
      if (d.test != test) continue;
      judged.directions.push_back(i);
      first.push_back(Sample{.source = d.source, .destination = d.destination, .figure = d.first.figure});
      last.push_back(Sample{.source = d.source, .destination = d.destination, .figure = d.last().figure});
    }
    judged.first_pass_median = median_of_figures(first);
    auto settings = analysis_settings(test);
    settings.reference_median = judged.first_pass_median;
    judged.analysis = mesh::analyse(last, settings);
    analyses.push_back(std::move(judged));
  }
}

const TestAnalysis& MeshResults::analysis_of(Test test) const {
  for (const auto& judged : analyses) {
    if (judged.test == test) return judged;
  }
  static const TestAnalysis none;
  return none;
}

std::vector<bool> MeshResults::outlier_flags() const {
  std::vector<bool> flags(directions.size(), false);
  for (const auto& judged : analyses) {
    for (const auto& outlier : judged.analysis.outliers) flags[judged.directions[outlier.sample]] = true;
  }
  return flags;
}

bool MeshResults::all_good() const {
  const auto outliers = outlier_flags();
  for (std::size_t i = 0; i < directions.size(); ++i) {
    if (!directions[i].last().figure || outliers[i]) return false;
  }
  return true;
}

void MeshResults::add_to(nlohmann::json& document) const {
  document["ranks"] = ranks;
  document["tests"] = nlohmann::json::array();
  for (const auto test : tests) document["tests"].push_back(to_string(test));
  document["rounds"] = rounds;
  document["rounds_completed"] = rounds_completed;
  document["finished"] = finished;
  document["left_out"] = left_out;
  document["retest_passes"] = retest_passes_json(retest_passes);
  document["retests_ended"] = to_string(retests_ended);
  document["nodes"] = nodes;
  if (const auto fabric = mixed_fabric(nodes); !fabric.empty()) document["warnings"] = fabric;
  document["pairs"] = nlohmann::json::array();
  const auto outliers = outlier_flags();
  for (std::size_t i = 0; i < directions.size(); ++i) {
    document["pairs"].push_back(direction_json(directions[i], outliers[i]));
  }
  document["summary"] = nlohmann::json::object();
  for (const auto test : tests) {
    document["summary"][std::string(to_string(test))] = summary_json(*this, test, analysis_of(test));
  }
}

std::string MeshResults::text() const {
  std::string out = fmt::format("rdma_mesh: {} ranks, {} rounds, {} directions measured\n", ranks, rounds_completed,
                                directions.size());
  out += nodes_text(*this);
  out += coverage_text(*this);
  const auto outliers = outlier_flags();
  for (const auto test : tests) {
    out += fmt::format("\n{} ({}, {}; rows: source rank, columns: destination; * outlier)\n", to_string(test),
                       figure_name(test), unit_of(test));
    out += matrix_text(*this, test, outliers);
    out += findings_text(*this, test, analysis_of(test));
  }
  return out;
}

}  // namespace rdmakit::mesh
