// rdma_mesh's report section: the JSON document and the text a person reads (a matrix per
// test, the spread, the slowest pairs, outliers, node problems and failures).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/mesh/mesh_json.hpp"
#include "lib/mesh/rdma_mesh_session.hpp"

namespace rdmakit::mesh {

namespace {

std::string_view figure_name(Test test) {
  switch (test) {
    case Test::bandwidth: return "average bandwidth";
    case Test::latency: return "median latency";
    case Test::connect: return "median connection set-up (resolve, route, connect)";
  }
  return "";
}

nlohmann::json direction_json(const Direction& d, bool outlier) {
  return to_json(PairRecord{.direction = d,
                            .unit = std::string(unit_of(d.test)),
                            .outlier = outlier,
                            .final_outcome = d.last().outcome,
                            .final_figure = d.last().figure});
}

// The test's matrix in the table (analyse() keeps one for every test).
const TestMatrix& matrix_of(const MeshResults& results, Test test) {
  if (const auto* found = results.table.find(std::string(to_string(test)))) return *found;
  static const TestMatrix none;
  return none;
}

struct Cell {
  int source = 0;
  int destination = 0;
  double first = no_figure;
  double last = no_figure;
  bool retested = false;
};

Cell cell_of(const TestMatrix& matrix, std::size_t cell) {
  const auto ranks = static_cast<std::size_t>(matrix.ranks);
  return Cell{.source = static_cast<int>(cell / ranks),
              .destination = static_cast<int>(cell % ranks),
              .first = matrix.first[cell],
              .last = matrix.last[cell],
              .retested = matrix.retests[cell] > 0};
}

nlohmann::json summary_json(const MeshResults& results, Test test, const TestAnalysis& judged) {
  const auto& analysis = judged.analysis;
  const auto& matrix = matrix_of(results, test);
  SummaryRecord summary{.unit = std::string(unit_of(test)),
                        .figure = std::string(figure_name(test)),
                        .measured = analysis.measured,
                        .failed = analysis.failed,
                        .min = analysis.min,
                        .median = analysis.median,
                        .first_pass_median = judged.first_pass_median,
                        .max = analysis.max,
                        .threshold = results.analysis_settings(test).threshold,
                        .rule = results.rule,
                        .slowest = {},
                        .outliers = {},
                        .node_problems = {},
                        .culprits = judged.culprits};
  for (const auto index : analysis.slowest) {
    const auto c = cell_of(matrix, judged.cells[index]);
    summary.slowest.push_back({.source = c.source, .destination = c.destination, .figure = c.last});
  }
  for (const auto& outlier : analysis.outliers) {
    const auto c = cell_of(matrix, judged.cells[outlier.sample]);
    summary.outliers.push_back({.source = c.source,
                                .destination = c.destination,
                                .figure = c.last,
                                .first_figure = std::isnan(c.first) ? std::nullopt : std::optional(c.first),
                                .ratio = outlier.ratio});
  }
  for (const auto& problem : analysis.node_problems) {
    summary.node_problems.push_back(
        {.rank = problem.rank, .host = results.table.host_of(problem.rank), .links = problem.links});
  }
  return to_json(summary);
}

// The matrix form of the report: every test's first and last figures, row = source rank,
// null where a direction failed or was not measured, and the failures with their causes.
nlohmann::json matrices_json(const MeshResults& results) {
  auto matrices = nlohmann::json::object();
  for (const auto& matrix : results.table.tests) {
    auto rows = [&](const std::vector<double>& cells) {
      std::vector<MatrixRow> out(static_cast<std::size_t>(matrix.ranks));
      for (int row = 0; row < matrix.ranks; ++row) {
        for (int column = 0; column < matrix.ranks; ++column) {
          const auto figure = cells[matrix.index(row, column)];
          out[static_cast<std::size_t>(row)].push_back(std::isnan(figure) ? std::nullopt : std::optional(figure));
        }
      }
      return out;
    };
    matrices[matrix.test] = to_json(MatrixRecord{.unit = std::string(unit_of(test_named(matrix.test).value())),
                                                 .first = rows(matrix.first),
                                                 .final = rows(matrix.last),
                                                 .failures = matrix.failures});
  }
  return matrices;
}

// Wider than this, a matrix is no use as text: the JSON has it, and scripts/bench-plot.sh draws it.
constexpr int widest_text_matrix = 32;
// Lines of one kind (outliers, failures) the text shows before it counts the rest.
constexpr std::size_t most_lines = 50;

std::string matrix_text(const MeshResults& results, Test test, const std::vector<bool>& flagged) {
  const auto& matrix = matrix_of(results, test);
  if (results.ranks > widest_text_matrix) {
    return fmt::format("({} x {}: too wide to print; --json has the matrices, scripts/bench-plot.sh draws them)\n",
                       results.ranks, results.ranks);
  }
  std::string out = fmt::format("{:>6}", "src\\dst");
  for (int column = 0; column < results.ranks; ++column) out += fmt::format(" {:>9}", column);
  out += "\n";
  for (int row = 0; row < results.ranks; ++row) {
    out += fmt::format("{:>7}", row);
    for (int column = 0; column < results.ranks; ++column) {
      std::string shown;
      if (row == column) {
        shown = "-";
      } else if (matrix.ranks == results.ranks) {
        const auto cell = matrix.index(row, column);
        if (matrix.state[cell] == CellState::failed) shown = "FAIL";
        if (matrix.state[cell] == CellState::measured) {
          shown = fmt::format("{}{:.4g}", flagged[cell] ? "*" : "", matrix.last[cell]);
        }
      }
      out += fmt::format(" {:>9}", shown);
    }
    out += "\n";
  }
  return out;
}

std::string pair_name(const Cell& c) {
  return fmt::format("{}->{}", c.source, c.destination);
}

std::string more_line(std::size_t shown, std::size_t all, std::string_view what) {
  return shown < all ? fmt::format("... and {} more {} (--json lists them all)\n", all - shown, what) : "";
}

std::string rule_text(const MeshResults& results, Test test, const Better better) {
  if (results.rule == Rule::clusterkit) {
    return better == Better::higher ? fmt::format("below {} x max", clusterkit_bw_fraction)
                                    : fmt::format("above {} x min", clusterkit_time_factor);
  }
  return fmt::format("{} {} x", better == Better::higher ? "below" : "above",
                     results.analysis_settings(test).threshold);
}

std::string culprits_text(const TestAnalysis& judged) {
  std::string out;
  for (const auto& culprit : judged.culprits) {
    out += fmt::format("culprit: {} {}: {} (confidence {:.2f})\n  next: {}\n", to_string(culprit.kind), culprit.name,
                       culprit.evidence, culprit.confidence, culprit.next);
  }
  return out;
}

std::string findings_text(const MeshResults& results, Test test, const TestAnalysis& judged) {
  const auto& matrix = matrix_of(results, test);
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
    const auto c = cell_of(matrix, judged.cells[index]);
    slowest += fmt::format(" {} {:.4g}", pair_name(c), c.last);
  }
  if (!slowest.empty()) out += "slowest:" + slowest + "\n";
  out += culprits_text(judged);
  const auto& settings = results.analysis_settings(test);
  for (std::size_t i = 0; i < analysis.outliers.size() && i < most_lines; ++i) {
    const auto& outlier = analysis.outliers[i];
    const auto c = cell_of(matrix, judged.cells[outlier.sample]);
    std::string history = c.retested ? fmt::format(" (first {:.4g}, retested)", std::isnan(c.first) ? 0 : c.first) : "";
    out += fmt::format("outlier: {} {:.4g} {} = {:.2f} x median ({}){}\n", pair_name(c), c.last, unit, outlier.ratio,
                       rule_text(results, test, settings.better), history);
  }
  out += more_line(std::min(analysis.outliers.size(), most_lines), analysis.outliers.size(), "outliers");
  for (const auto& problem : analysis.node_problems) {
    out += fmt::format("node problem: rank {} ({}): all {} of its links are outliers or failed\n", problem.rank,
                       results.table.host_of(problem.rank), problem.links);
  }
  for (std::size_t i = 0; i < matrix.failures.size() && i < most_lines; ++i) {
    const auto& failure = matrix.failures[i];
    out += fmt::format("failed: {}->{}: {}\n", failure.source, failure.destination, failure.message);
  }
  out += more_line(std::min(matrix.failures.size(), most_lines), matrix.failures.size(), "failures");
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
  for (const auto& line : results.warnings) out += "warning: " + line + "\n";
  return out;
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

// The live run's directions as matrices, and for each matrix the direction of every cell
// (-1: none), so that a sample's cell leads back to its direction.
MeshTable table_of(const MeshResults& results, std::vector<std::vector<std::int64_t>>& direction_of_cell) {
  MeshTable table;
  table.ranks = results.ranks;
  table.nodes = results.nodes;
  direction_of_cell.clear();
  for (const auto test : results.tests) {
    TestMatrix matrix(std::string(to_string(test)), results.analysis_settings(test).better, results.ranks);
    std::vector<std::int64_t> directions(matrix.cell_count(), -1);
    for (std::size_t i = 0; i < results.directions.size(); ++i) {
      const auto& d = results.directions[i];
      if (d.test != test || d.source < 0 || d.destination < 0 || d.source >= results.ranks ||
          d.destination >= results.ranks) {
        continue;
      }
      const auto cell = matrix.index(d.source, d.destination);
      directions[cell] = static_cast<std::int64_t>(i);
      matrix.first[cell] = d.first.figure.value_or(no_figure);
      matrix.last[cell] = d.last().figure.value_or(no_figure);
      matrix.retests[cell] = static_cast<std::uint8_t>(std::min<std::size_t>(d.retests.size(), 255));
      matrix.state[cell] = d.last().figure ? CellState::measured : CellState::failed;
      if (!d.last().figure) {
        const auto& error = d.last().error;
        matrix.failures.push_back(
            Failure{.source = d.source,
                    .destination = d.destination,
                    .cause = d.cause,
                    .message = error && error->is_object() ? error->value("message", std::string()) : std::string()});
      }
    }
    table.tests.push_back(std::move(matrix));
    direction_of_cell.push_back(std::move(directions));
  }
  return table;
}

// Outliers as ClusterKit judges them (against the maximum or minimum), in place of the
// median rule's; the ratio stays against the median, which the text shows beside it.
void judge_by_clusterkit(const TestMatrix& matrix, TestAnalysis& judged) {
  const auto bad = bad_cells(matrix, JudgeSettings{.rule = Rule::clusterkit, .threshold = 0, .reference_median = {}});
  const double median = judged.analysis.median.value_or(0);
  judged.analysis.outliers.clear();
  for (std::size_t sample = 0; sample < judged.cells.size(); ++sample) {
    const auto cell = judged.cells[sample];
    if (!bad[cell] || !matrix.has_figure(cell)) continue;
    judged.analysis.outliers.push_back(Outlier{.sample = sample, .ratio = median > 0 ? matrix.last[cell] / median : 0});
  }
  const bool higher = matrix.better == Better::higher;
  std::sort(judged.analysis.outliers.begin(), judged.analysis.outliers.end(),
            [&](const Outlier& a, const Outlier& b) { return higher ? a.ratio < b.ratio : a.ratio > b.ratio; });
}

}  // namespace

void MeshResults::analyse() {
  std::vector<std::vector<std::int64_t>> direction_of_cell;
  if (analysed_from.empty()) table = table_of(*this, direction_of_cell);
  analyses.clear();
  for (std::size_t t = 0; t < tests.size() && t < table.tests.size(); ++t) {
    const auto test = tests[t];
    const auto& matrix = table.tests[t];
    TestAnalysis judged{
        .test = test, .cells = {}, .directions = {}, .first_pass_median = std::nullopt, .analysis = {}, .culprits = {}};
    std::vector<Sample> first;
    std::vector<Sample> last;
    const auto width = static_cast<std::size_t>(matrix.ranks);
    for (std::size_t cell = 0; cell < matrix.cell_count(); ++cell) {
      if (matrix.state[cell] == CellState::not_measured) continue;
      judged.cells.push_back(cell);
      if (!direction_of_cell.empty()) judged.directions.push_back(static_cast<std::size_t>(direction_of_cell[t][cell]));
      const auto source = static_cast<int>(cell / width);
      const auto destination = static_cast<int>(cell % width);
      const auto figure_at = [](double figure) { return std::isnan(figure) ? std::nullopt : std::optional(figure); };
      first.push_back(Sample{.source = source, .destination = destination, .figure = figure_at(matrix.first[cell])});
      last.push_back(Sample{.source = source, .destination = destination, .figure = figure_at(matrix.last[cell])});
    }
    judged.first_pass_median = median_of_figures(first);
    first = {};
    auto settings = analysis_settings(test);
    settings.reference_median = judged.first_pass_median;
    judged.analysis = mesh::analyse(last, settings);
    if (rule == Rule::clusterkit) judge_by_clusterkit(matrix, judged);
    judged.culprits = locate_culprits(
        matrix, table.nodes,
        LocateSettings{
            .judge = {.rule = rule, .threshold = settings.threshold, .reference_median = settings.reference_median},
            .topology = topology ? &*topology : nullptr,
            .siblings = siblings});
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
    if (judged.directions.empty()) continue;
    for (const auto& outlier : judged.analysis.outliers) flags[judged.directions[outlier.sample]] = true;
  }
  return flags;
}

bool MeshResults::all_good() const {
  return std::ranges::all_of(analyses, [](const TestAnalysis& judged) {
    return judged.analysis.failed == 0 && judged.analysis.outliers.empty();
  });
}

void MeshResults::add_to(nlohmann::json& document) const {
  const bool matrix_form = !analysed_from.empty() || ranks > matrix_form_above_ranks;
  std::vector<RetestPassRecord> passes;
  for (const auto& pass : retest_passes) {
    passes.push_back({.pairs = 0, .rounds = pass});
    for (const auto& round : pass) passes.back().pairs += round.size();
  }
  auto fabric = mixed_fabric(nodes);
  fabric.insert(fabric.end(), warnings.begin(), warnings.end());
  document.update(to_json(MeshHead{
      .ranks = ranks, .tests = tests, .rounds = rounds, .rounds_completed = rounds_completed, .finished = finished}));
  document.update(to_json(MeshRunRecord{.left_out = left_out,
                                        .retest_passes = std::move(passes),
                                        .retests_ended = retests_ended,
                                        .warnings = std::move(fabric),
                                        .analysed_from = analysed_from,
                                        .topology = topology ? topology->origin : std::string(),
                                        .form = matrix_form ? "matrix" : "pairs"}));
  nlohmann::json described_nodes = nlohmann::json::array();
  for (const auto& node : nodes) described_nodes.push_back(to_json(node));
  document["nodes"] = std::move(described_nodes);
  if (matrix_form) {
    document["matrices"] = matrices_json(*this);
  } else {
    document["pairs"] = nlohmann::json::array();
    const auto outliers = outlier_flags();
    for (std::size_t i = 0; i < directions.size(); ++i) {
      document["pairs"].push_back(direction_json(directions[i], outliers[i]));
    }
  }
  document["summary"] = nlohmann::json::object();
  for (const auto test : tests) {
    document["summary"][std::string(to_string(test))] = summary_json(*this, test, analysis_of(test));
  }
}

std::string MeshResults::text() const {
  std::size_t measured = 0;
  for (const auto& judged : analyses) measured += judged.cells.size();
  std::string out = fmt::format("rdma_mesh: {} ranks, {} rounds, {} directions measured{}\n", ranks, rounds_completed,
                                measured, analysed_from.empty() ? "" : fmt::format(" (read from {})", analysed_from));
  out += nodes_text(*this);
  if (analysed_from.empty()) out += coverage_text(*this);
  for (const auto test : tests) {
    const auto& judged = analysis_of(test);
    std::vector<bool> flagged(matrix_of(*this, test).cell_count(), false);
    for (const auto& outlier : judged.analysis.outliers) flagged[judged.cells[outlier.sample]] = true;
    out += fmt::format("\n{} ({}, {}; rows: source rank, columns: destination; * outlier)\n", to_string(test),
                       figure_name(test), unit_of(test));
    out += matrix_text(*this, test, flagged);
    out += findings_text(*this, test, judged);
  }
  return out;
}

void conclude(const MeshResults& results, Report& report, bool say_findings) {
  const bool no_device =
      !results.nodes.empty() && std::all_of(results.nodes.begin(), results.nodes.end(), [](const Node& node) {
        return !node.usable && node.verdict.value("cause", std::string()) == "no_rdma_device";
      });
  report.exit_code = no_device ? ExitCode::no_device : results.all_good() ? ExitCode::ok : ExitCode::run_failed;
  if (report.exit_code == ExitCode::ok) return;
  report.outcome = Outcome::failed;
  if (!say_findings) return;
  std::size_t failed = 0;
  std::size_t outliers = 0;
  std::size_t directions = 0;
  std::size_t culprits = 0;
  for (const auto& judged : results.analyses) {
    failed += judged.analysis.failed;
    outliers += judged.analysis.outliers.size();
    directions += judged.cells.size();
    culprits += judged.culprits.size();
  }
  std::string unusable;
  for (const auto& node : results.nodes) {
    if (node.usable) continue;
    unusable += fmt::format("{}rank {}: {}", unusable.empty() ? "" : ", ", node.rank,
                            node.verdict.value("cause", std::string("unknown")));
  }
  std::string line;
  if (no_device) {
    line = "no RDMA device on any rank (" + unusable + ")";
  } else {
    line = fmt::format("{} of {} directions failed, {} outlier(s) after the retests", failed, directions, outliers);
    if (culprits > 0) line += fmt::format(", {} culprit(s)", culprits);
    if (!unusable.empty()) line += fmt::format(" (cannot take part: {})", unusable);
  }
  report.errors.push_back(ErrorRecord{.message = line, .call = {}, .errnum = 0, .hint = {}, .completion = {}});
}

}  // namespace rdmakit::mesh
