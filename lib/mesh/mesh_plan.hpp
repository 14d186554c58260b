#pragma once
// rdma_mesh's pure logic: which pairs of ranks meet in which round, and what the measured
// matrix says (spread, outliers, nodes whose every link is bad). No RDMA and no MPI here,
// so unit tests feed it directly.

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lib/mesh/mesh_node.hpp"

namespace rdmakit::mesh {

// Two ranks that are measured against each other; `low` < `high`.
struct RankPair {
  int low = 0;
  int high = 0;
  friend bool operator==(const RankPair&, const RankPair&) = default;
};

// Pairs measured at the same time: no rank appears twice in one round.
using Round = std::vector<RankPair>;

// Every pair of `ranks` exactly once, by the circle method: ranks - 1 rounds for an even
// count, `ranks` rounds (one rank sitting out each) for an odd one; none for fewer than 2.
std::vector<Round> round_robin(int ranks);

// `pairs` one per round (rdma_mesh --serial, retests: a link without the load of others).
std::vector<Round> one_per_round(const std::vector<RankPair>& pairs);

// `pairs` packed greedily into as few rounds as that finds, in the given order, no rank
// twice in a round (rdma_mesh --pairs).
std::vector<Round> pack_rounds(const std::vector<RankPair>& pairs);

// rdma_mesh --quick, a health check between jobs: every rank in exactly one pair, rank r
// with rank r + N/2 (with ranks placed in blocks, as mpirun and srun do by default, that
// pairs ranks on different hosts rather than neighbours on one); all in one round. For an
// odd count the last rank, N - 1, is left out. None for fewer than 2.
Round quick_round(int ranks);

// The rank --quick leaves out: N - 1 for an odd count, none for an even one.
std::optional<int> quick_left_out(int ranks);

// Why the retests ended.
enum class RetestEnd {
  running,     // not yet: another pass may run
  cleared,     // no pair flagged any more (or none was)
  no_smaller,  // the last pass left as many flagged pairs as it started with
  cap,         // --retest passes run
};
inline constexpr std::array<std::string_view, 4> retest_end_names{"running", "cleared", "no_smaller", "cap"};
std::string_view to_string(RetestEnd end);

// The retests as ClusterKit runs them: the flagged pairs measured again in rounds where pairs
// that share no rank run at once (pack_rounds; one per round with `serial`), pass after pass
// on what is still flagged, while each pass leaves the set smaller. ClusterKit halves its set
// of suspects every round; here a pass needs only to shrink it to earn the next, since with a
// few suspects (3 -> 2: a blip cleared, a real fault left) halving would stop too early, and
// a real fault does not shrink at all, which ends the passes. At most `cap` passes.
class RetestSchedule {
 public:
  RetestSchedule(int cap, bool serial) : cap_(cap), serial_(serial) {}

  // The rounds of the next pass over `flagged` (the pairs the analysis flags now: a subset
  // of the last pass's, as only those were measured again), or none when the retests are
  // over; end() then says why.
  std::optional<std::vector<Round>> next(const std::vector<RankPair>& flagged);

  RetestEnd end() const { return end_; }
  int passes() const { return passes_; }

 private:
  int cap_;
  bool serial_;
  int passes_ = 0;
  std::size_t last_size_ = 0;
  RetestEnd end_ = RetestEnd::running;
};

// The --pairs file: one pair per line as two rank numbers ("3 7", "3,7" or "3-7"), blank
// lines and text after '#' ignored; a pair given twice (in either order) counts once.
// Throws UsageError naming the line for anything else: a rank outside [0, ranks), a rank
// paired with itself, a line that is not two numbers, or a file with no pair at all.
std::vector<RankPair> parse_pair_list(std::string_view text, int ranks);

// What a figure means for the outlier test.
enum class Better { higher, lower };  // bandwidth: higher; latency and set-up time: lower

// One measured direction of one pair: `figure` empty when it failed.
struct Sample {
  int source = 0;
  int destination = 0;
  std::optional<double> figure;
};

struct Outlier {
  std::size_t sample = 0;  // index into the samples given
  double ratio = 0;        // figure / median
};

// A rank whose every measured link (as source or destination) is an outlier or failed:
// the node rather than a link is the likely problem. Only said of a rank with links to at
// least two other ranks (with one, the link and the node cannot be told apart).
struct NodeProblem {
  int rank = 0;
  std::size_t links = 0;  // samples with this rank on either end
};

struct Analysis {
  std::size_t measured = 0;  // samples with a figure
  std::size_t failed = 0;    // samples without
  std::optional<double> min;
  std::optional<double> median;  // of the samples with a figure (mean of the middle two for an even count)
  std::optional<double> max;
  std::vector<std::size_t> slowest;  // up to `slowest_count` indices, worst first (failed ones not included)
  std::vector<Outlier> outliers;     // worst first
  std::vector<NodeProblem> node_problems;
};

// rdma_mesh's outlier thresholds unless told otherwise: a bandwidth below 0.8 times the
// median (--threshold), a latency or set-up time above 2 times it (--lat-threshold).
inline constexpr double default_bw_threshold = 0.8;
inline constexpr double default_time_threshold = 2.0;

struct AnalysisSettings {
  Better better = Better::higher;
  // An outlier: figure < threshold * median (higher is better) or > threshold * median
  // (lower is better).
  double threshold = default_bw_threshold;
  std::size_t slowest_count = 5;
  // Judge outliers against this median instead of the samples' own: after the retests,
  // the first pass's, which every first figure was measured under (a retest runs alone,
  // and its higher figures would raise the bar for directions never retested).
  std::optional<double> reference_median;
};

Analysis analyse(const std::vector<Sample>& samples, const AnalysisSettings& settings);

// The middle value, the mean of the middle two for an even count; 0 for none.
double median_of(std::vector<double> values);

// The median of the samples with a figure (as analyse() gives it); none when none has one.
std::optional<double> median_of_figures(const std::vector<Sample>& samples);

// Whether `figure` is an outlier against `median` under `settings`.
bool is_outlier(double figure, double median, const AnalysisSettings& settings);

// The ranks do not share one kind of fabric: their GIDs' types differ (a RoCE v1 port and a
// RoCE v2 port do not understand each other's packets; IB is another network), or some listen
// on IPv4 and others on IPv6 (rdma_cm connects within one family). One line for each, naming
// which ranks have which ("mixed fabric: GID types differ: RoCE v2 on ranks 0, 1; RoCE v1
// on rank 2"); none for a uniform mesh. A rank with no GID type or no address is left out.
std::vector<std::string> mixed_fabric(const std::vector<Node>& nodes);

}  // namespace rdmakit::mesh
