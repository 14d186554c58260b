#pragma once
// rdma_mesh: every pair of a job's ranks measured over rdma_cm with send_bw's session
// (lib/send_bw/send_bw_session), round by round as lib/mesh/mesh_plan schedules them. The job
// (lib/tool/job.hpp, MPI in practice) only starts the ranks, exchanges what they found and
// keeps the rounds in step; every measured byte goes over the rdma_cm connections.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/report.hpp"
#include "lib/base/sibling_names.hpp"
#include "lib/mesh/mesh_culprits.hpp"
#include "lib/mesh/mesh_direction.hpp"
#include "lib/mesh/mesh_matrix.hpp"
#include "lib/mesh/mesh_node.hpp"
#include "lib/mesh/mesh_plan.hpp"
#include "lib/mesh/mesh_report_read.hpp"
#include "lib/send_bw/send_bw_session.hpp"
#include "lib/tool/job.hpp"
#include "lib/tool/progress.hpp"
#include "lib/topology/topology.hpp"

namespace rdmakit::mesh {

struct MeshSettings {
  // The test's parameters (operation, size, budget, depth, ...). Each pair fills in the
  // peer, the local address and the port.
  BwSettings bw;
  std::vector<Test> tests{Test::bandwidth};
  std::uint32_t latency_size = 2;
  std::uint16_t connections = 4;    // --test cm: connections set up one after another
  std::uint16_t base_port = 18600;  // rank r listens on base_port + r
  bool one_way = false;
  bool serial = false;
  std::vector<RankPair> only_pairs;  // --pairs: these alone
  int retests = 1;                   // the most retest passes (RetestSchedule)
  bool quick = false;                // one round of N/2 pairs that share no rank (quick_round)
  double bw_threshold = default_bw_threshold;
  double time_threshold = default_time_threshold;
  Rule rule = Rule::median;          // --rule
  std::optional<Topology> topology;  // --topology, or Slurm's under Slurm
  std::string json_file;             // rank 0 rewrites it after every round
  Progress* progress = nullptr;      // rank 0's: "round N of M" with the pairs done and an ETA
};

// One test's analysis over the directions measured so far. Its samples are the test's
// matrix cells that were measured or failed, in row-major order: sample i is cell cells[i] of
// the test's matrix in MeshResults::table, and in a live run
// MeshResults::directions[directions[i]] (none after --analyse).
struct TestAnalysis {
  Test test = Test::bandwidth;
  std::vector<std::size_t> cells;
  std::vector<std::size_t> directions;
  // The median of the first attempts, which outliers are judged against: a retest runs
  // alone, and its higher figures would raise the bar for directions never retested.
  std::optional<double> first_pass_median;
  Analysis analysis;  // of the last attempts
  std::vector<Culprit> culprits;
};

// A report of more ranks than this gives its figures as matrices rather than one object a
// direction: 128 ranks are 16,256 directions a test, some 6 MB of JSON in the long form.
// The reader of saved reports refuses the long form above it (mesh_report_read).
inline constexpr int matrix_form_above_ranks = pairs_form_most_ranks;

// rdma_mesh's report: the nodes, every direction measured, and per test the spread,
// outliers and node problems.
struct MeshResults final : ReportSection {
  int ranks = 0;
  std::vector<Test> tests;
  std::vector<Node> nodes;
  std::vector<Direction> directions;
  int rounds = 0;
  int rounds_completed = 0;
  // False in the --json-file rank 0 rewrites as the rounds end: the run was still going
  // (a job that died leaves it so).
  bool finished = false;
  // The ranks in no pair of the plan (--quick with an odd count, --pairs): not measured.
  std::vector<int> left_out;
  // The retest passes run, each the rounds of pairs measured again at once, and why they
  // ended (running until they have).
  std::vector<std::vector<Round>> retest_passes;
  RetestEnd retests_ended = RetestEnd::running;
  AnalysisSettings bw_analysis{.better = Better::higher,
                               .threshold = default_bw_threshold,
                               .slowest_count = 5,
                               .reference_median = std::nullopt};
  AnalysisSettings time_analysis{.better = Better::lower,
                                 .threshold = default_time_threshold,
                                 .slowest_count = 5,
                                 .reference_median = std::nullopt};

  // How directions are judged bad (--rule) and where the hosts hang (--topology).
  Rule rule = Rule::median;
  std::optional<Topology> topology;
  // How the culprits' next steps name diag-bind: the report's (Report::siblings).
  SiblingNames siblings;
  // --analyse: the report read back. Its figures come as `table`, `directions` stay empty.
  std::string analysed_from;
  // The figures as matrices: built from `directions` by analyse() in a live run, read from
  // the report with --analyse.
  MeshTable table;
  // Said in the report beside the mixed-fabric lines: what --topology could not place.
  std::vector<std::string> warnings;

  void add_to(nlohmann::json& document) const override;
  std::string text() const override;

  // One per test, in the order of `tests`, as of the last analyse(): the one source of the
  // retests, the outlier flags, the summary, the text and the exit code.
  std::vector<TestAnalysis> analyses;

  const AnalysisSettings& analysis_settings(Test test) const {
    return test == Test::bandwidth ? bw_analysis : time_analysis;
  }
  // Analyses every test over the directions so far (or the table read back); run_rdma_mesh
  // calls it once per round, before the round's --json-file is written.
  void analyse();
  // The stored analysis of `test` (an empty one before the first analyse()).
  const TestAnalysis& analysis_of(Test test) const;
  // Per direction, whether the stored analysis calls it an outlier.
  std::vector<bool> outlier_flags() const;
  // No direction failed and none is an outlier: the exit 0.
  bool all_good() const;
};

// The report's end from the analysis: exit 0 when every direction has a figure and none is
// an outlier, 77 when no rank has a device, else 1 with the findings in one line (added
// when `say_findings`: by the rank that prints the report).
void conclude(const MeshResults& results, Report& report, bool say_findings);

// Runs the mesh on this rank, which `self` describes, and fills `results` (complete on
// rank 0). Every wait is bounded by settings.bw.limits; a failed pair is recorded and the
// mesh goes on. Every rank returns the same exit code in `report`.
void run_rdma_mesh(Job& job, const MeshSettings& settings, const Node& self, Report& report, MeshResults& results);

}  // namespace rdmakit::mesh
