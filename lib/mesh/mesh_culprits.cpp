#include "lib/mesh/mesh_culprits.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/base/named_values.hpp"

namespace rdmakit::mesh {

std::string_view to_string(Rule rule) {
  return name_in(rule_names, rule, "median");
}

std::string_view to_string(CulpritKind kind) {
  return name_in(culprit_kind_names, kind, "node");
}

namespace {

// The thresholds doc/mesh.md ("How culprits are named") states and argues.
constexpr double mostly_bad = 0.5;   // a node's, a NIC's, a leaf's crossing directions; a pair's own
constexpr double mostly_fine = 0.1;  // the rest of a link's ends, a leaf's inside, a NIC's siblings
constexpr double far_bw = 0.5;       // one direction alone makes a link when below 0.5 x the reference ...
constexpr double far_time = 2.0;     // ... or, for times, above 2 x the bar
// The typical host's share of low directions moves both bars: "mostly bad" is also at least
// twice it and "fine" up to 1.5 times it (ClusterKit's rule flags ~26% of a clean +-5% matrix),
// within caps, since a fault on half the mesh (one of two leaves) raises it too.
constexpr double typical_factor = 2;
constexpr double typical_fine = 1.5;
constexpr double bad_bar_cap = 0.75;
constexpr double fine_bar_cap = 0.4;

// What the cells were judged against.
struct Bar {
  Better better = Better::higher;
  double reference = 0;  // the median (median rule), the maximum or the minimum (clusterkit)
  double factor = 0;     // bad beyond factor x reference
  double limit() const { return factor * reference; }
  // What a culprit's median ratio divides by: the median, or ClusterKit's bar.
  double ratio_base(Rule rule) const { return rule == Rule::clusterkit ? limit() : reference; }
  bool bad(double figure) const { return is_outlier(figure, reference, AnalysisSettings{better, factor, 0, {}}); }
  bool far(double figure) const {
    return better == Better::higher ? figure < far_bw * reference : figure > far_time * limit();
  }
};

std::optional<Bar> clusterkit_bar(const TestMatrix& matrix) {
  std::optional<double> best;
  for (std::size_t cell = 0; cell < matrix.cell_count(); ++cell) {
    if (matrix.state[cell] != CellState::measured || !matrix.has_figure(cell)) continue;
    const double figure = matrix.last[cell];
    if (!best || (matrix.better == Better::higher ? figure > *best : figure < *best)) best = figure;
  }
  if (!best) return std::nullopt;
  const double factor = matrix.better == Better::higher ? clusterkit_bw_fraction : clusterkit_time_factor;
  return Bar{matrix.better, *best, factor};
}

std::optional<Bar> judge_bar(const TestMatrix& matrix, const JudgeSettings& settings) {
  if (settings.rule == Rule::clusterkit) return clusterkit_bar(matrix);
  if (settings.reference_median) return Bar{matrix.better, *settings.reference_median, settings.threshold};
  std::vector<double> firsts;
  std::vector<double> lasts;
  for (std::size_t cell = 0; cell < matrix.cell_count(); ++cell) {
    if (matrix.state[cell] != CellState::measured) continue;
    if (!std::isnan(matrix.first[cell])) firsts.push_back(matrix.first[cell]);
    if (matrix.has_figure(cell)) lasts.push_back(matrix.last[cell]);
  }
  // A first attempt that failed and a retest that did not: only the last figures have one.
  if (firsts.empty()) firsts = std::move(lasts);
  if (firsts.empty()) return std::nullopt;
  return Bar{matrix.better, median_of(std::move(firsts)), settings.threshold};
}

std::vector<std::uint8_t> judged(const TestMatrix& matrix, const std::optional<Bar>& bar) {
  std::vector<std::uint8_t> bad(matrix.cell_count(), 0);
  for (std::size_t cell = 0; cell < matrix.cell_count(); ++cell) {
    const CellState state = matrix.state[cell];
    const bool low = state == CellState::measured && bar && matrix.has_figure(cell) && bar->bad(matrix.last[cell]);
    bad[cell] = state == CellState::failed || low ? 1 : 0;
  }
  return bad;
}

double share(std::size_t part, std::size_t whole) {
  return whole == 0 ? 0 : static_cast<double>(part) / static_cast<double>(whole);
}

// More directions, more certainty: 2 directions weigh 0.5, 14 weigh 0.875, 126 weigh 0.98.
double weight(std::size_t directions) {
  const auto n = static_cast<double>(directions);
  return n / (n + 2);
}

double confidence(double separation, std::size_t directions) {
  return std::clamp(separation, 0.0, 1.0) * weight(directions);
}

// The chance of `low` or more low directions of `total` when each is low with chance `p`: how
// likely the background alone gives a node's figures.
double chance_of_at_least(std::size_t low, std::size_t total, double p) {
  if (low == 0) return 1;
  if (p <= 0) return 0;
  if (p >= 1) return 1;
  const auto n = static_cast<double>(total);
  double sum = 0;
  for (std::size_t k = low; k <= total; ++k) {
    const auto i = static_cast<double>(k);
    sum += std::exp(std::lgamma(n + 1) - std::lgamma(i + 1) - std::lgamma(n - i + 1) + i * std::log(p) +
                    (n - i) * std::log1p(-p));
  }
  return sum;
}

// A node's low directions, as source and as destination together, are likelier than this
// from the rest of the mesh's share of low directions: not named (a noisy rule's scatter on a
// host left with few directions).
constexpr double background_chance = 0.01;

// What a culprit is named after: a host, or a rank when the hosts do not tell the ranks apart.
struct Units {
  std::vector<int> of_rank;
  std::vector<std::vector<int>> ranks;
  std::vector<std::string> names;
  bool by_host = false;
};

std::string node_host(const std::vector<Node>& nodes, int rank) {
  return rank < static_cast<int>(nodes.size()) ? nodes[static_cast<std::size_t>(rank)].host : std::string();
}

std::string rank_name(int rank) {
  return "rank " + std::to_string(rank);
}

Units host_units(int ranks, const std::vector<Node>& nodes) {
  std::map<std::string, int> index;
  for (int rank = 0; rank < ranks; ++rank) {
    const std::string host = node_host(nodes, rank);
    if (!host.empty()) index.emplace(host, 0);
  }
  Units units;
  units.by_host = index.size() > 1;
  units.of_rank.resize(static_cast<std::size_t>(ranks));
  for (int rank = 0; rank < ranks; ++rank) {
    const std::string host = units.by_host ? node_host(nodes, rank) : std::string();
    int unit = -1;
    if (!host.empty()) {
      auto found = index.find(host);
      if (found->second == 0) {
        found->second = static_cast<int>(units.names.size()) + 1;
        units.names.push_back(host);
        units.ranks.emplace_back();
      }
      unit = found->second - 1;
    } else {
      unit = static_cast<int>(units.names.size());
      units.names.push_back(rank_name(rank));
      units.ranks.emplace_back();
    }
    units.of_rank[static_cast<std::size_t>(rank)] = unit;
    units.ranks[static_cast<std::size_t>(unit)].push_back(rank);
  }
  return units;
}

std::string nic_name(const std::vector<Node>& nodes, int rank) {
  const std::string host = node_host(nodes, rank);
  const std::string device = rank < static_cast<int>(nodes.size()) ? nodes[static_cast<std::size_t>(rank)].device : "";
  return fmt::format("{}{}{} (rank {})", host, device.empty() ? "" : "/", device, rank);
}

// One rank's directions to and from ranks of other units (a rank's own host's other NICs are
// no evidence about the fabric) that no culprit explains yet: all of them, and the bad ones.
struct Counts {
  std::size_t out_bad = 0;
  std::size_t in_bad = 0;
  std::size_t out_total = 0;
  std::size_t in_total = 0;
  Counts& operator+=(const Counts& other) {
    out_bad += other.out_bad;
    in_bad += other.in_bad;
    out_total += other.out_total;
    in_total += other.in_total;
    return *this;
  }
  std::size_t bad() const { return out_bad + in_bad; }
  std::size_t total() const { return out_total + in_total; }
  double fraction() const { return share(bad(), total()); }
};

std::string ranks_text(const std::vector<int>& ranks) {
  constexpr std::size_t shown = 8;
  std::string list;
  for (std::size_t i = 0; i < ranks.size() && i < shown; ++i) list += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
  if (ranks.size() > shown) list += fmt::format(", ... ({} ranks)", ranks.size());
  return (ranks.size() == 1 ? "rank " : "ranks ") + list;
}

class Locator {
 public:
  Locator(const TestMatrix& matrix, const std::vector<Node>& nodes, const LocateSettings& settings)
      : matrix_(matrix),
        nodes_(nodes),
        settings_(settings),
        n_(matrix.ranks),
        bar_(judge_bar(matrix, settings.judge)),
        pool_(judged(matrix, bar_)),
        units_(host_units(matrix.ranks, nodes)) {
    count_ranks();
  }

  std::vector<Culprit> run() {
    causes();
    typical_ = typical_share();
    if (settings_.topology != nullptr && units_.by_host) switches();
    nodes();
    if (units_.by_host) nics();
    links(units_);
    if (units_.by_host && std::ranges::any_of(units_.ranks, [](const auto& ranks) { return ranks.size() > 1; })) {
      links(rank_units());
    }
    std::ranges::stable_sort(culprits_, [](const Culprit& a, const Culprit& b) { return a.confidence > b.confidence; });
    return std::move(culprits_);
  }

 private:
  std::size_t cell(int source, int destination) const { return matrix_.index(source, destination); }
  int unit(int rank) const { return units_.of_rank[static_cast<std::size_t>(rank)]; }
  bool counted(std::size_t at) const { return matrix_.state[at] != CellState::not_measured; }
  bool live(std::size_t at) const { return counted(at) && pool_[at] != explained; }
  Counts& counts(int rank) { return rank_counts_[static_cast<std::size_t>(rank)]; }

  void count_ranks() {
    rank_counts_.assign(static_cast<std::size_t>(n_), Counts{});
    directions_.assign(static_cast<std::size_t>(n_), 0);
    for (int s = 0; s < n_; ++s) {
      for (int d = 0; d < n_; ++d) {
        const std::size_t at = cell(s, d);
        if (s == d || !counted(at)) continue;
        ++directions_[static_cast<std::size_t>(s)];
        ++directions_[static_cast<std::size_t>(d)];
        if (unit(s) == unit(d)) continue;
        ++counts(s).out_total;
        ++counts(d).in_total;
        if (pool_[at] != low) continue;
        ++counts(s).out_bad;
        ++counts(d).in_bad;
      }
    }
  }

  // Takes a bad direction out of the pool: a culprit explains it. Its figure's ratio goes to
  // the culprit's median ratio.
  void explain(int source, int destination) {
    const std::size_t at = cell(source, destination);
    if (pool_[at] != low) return;
    pool_[at] = explained;
    if (unit(source) != unit(destination)) {
      --counts(source).out_bad;
      --counts(source).out_total;
      --counts(destination).in_bad;
      --counts(destination).in_total;
    }
    if (bar_ && matrix_.has_figure(at)) ratios_.push_back(matrix_.last[at] / bar_->ratio_base(settings_.judge.rule));
  }

  void explain_rank(int rank) {
    for (int other = 0; other < n_; ++other) {
      explain(rank, other);
      explain(other, rank);
    }
  }

  std::optional<double> take_ratio() {
    if (ratios_.empty()) return std::nullopt;
    const double median = median_of(std::move(ratios_));
    ratios_.clear();
    return median;
  }

  std::string ratio_text(const std::optional<double>& ratio) const {
    if (!ratio) return "all failed";
    return fmt::format("{:.2f} x {}", *ratio, settings_.judge.rule == Rule::clusterkit ? "bar" : "median");
  }

  // 1. Failed directions with a diagnosed cause, one culprit per cause.
  void causes() {
    std::map<std::string, std::vector<std::pair<int, int>>> by_cause;
    for (const Failure& failure : matrix_.failures) {
      if (failure.cause.empty() || failure.source < 0 || failure.source >= n_ || failure.destination < 0 ||
          failure.destination >= n_)
        continue;
      if (pool_[cell(failure.source, failure.destination)] == low)
        by_cause[failure.cause].emplace_back(failure.source, failure.destination);
    }
    for (const auto& [cause, directions] : by_cause) add_cause(cause, directions);
  }

  // The ranks a cause is named for: those that said they cannot take part for it (their
  // bind diagnosis); else those most of whose directions carry it; when none is, every rank
  // at an end of one. On a small mesh the healthy ranks' directions to a broken one are half
  // of theirs, so the share alone names them too.
  std::vector<int> cause_ranks(const std::string& cause, const std::vector<std::pair<int, int>>& directions) const {
    std::vector<std::size_t> carried(static_cast<std::size_t>(n_), 0);
    for (const auto& [s, d] : directions) {
      ++carried[static_cast<std::size_t>(s)];
      ++carried[static_cast<std::size_t>(d)];
    }
    std::vector<int> named;
    std::vector<int> ends;
    for (int rank = 0; rank < n_; ++rank) {
      const std::size_t count = carried[static_cast<std::size_t>(rank)];
      if (count == 0) continue;
      ends.push_back(rank);
      if (share(count, directions_[static_cast<std::size_t>(rank)]) >= mostly_bad) named.push_back(rank);
    }
    std::vector<int> diagnosed;
    for (const int rank : ends) {
      if (rank >= static_cast<int>(nodes_.size())) continue;
      const Node& node = nodes_[static_cast<std::size_t>(rank)];
      if (!node.usable && node.verdict.is_object() && node.verdict.value("cause", std::string()) == cause) {
        diagnosed.push_back(rank);
      }
    }
    if (!diagnosed.empty()) return diagnosed;
    return named.empty() ? ends : named;
  }

  // Directions with at least one end among `ranks` (ascending).
  std::size_t directions_of(const std::vector<int>& ranks) const {
    std::size_t total = 0;
    for (const int rank : ranks) total += directions_[static_cast<std::size_t>(rank)];
    for (const int a : ranks) {
      for (const int b : ranks) {
        if (a != b && counted(cell(a, b))) --total;
      }
    }
    return total;
  }

  std::vector<std::string> hosts_of(const std::vector<int>& ranks) const {
    std::vector<std::string> hosts;
    for (const int rank : ranks) {
      const std::string host = node_host(nodes_, rank);
      if (!host.empty() && std::ranges::find(hosts, host) == hosts.end()) hosts.push_back(host);
    }
    return hosts;
  }

  void add_cause(const std::string& cause, const std::vector<std::pair<int, int>>& directions) {
    Culprit culprit;
    culprit.kind = CulpritKind::cause;
    culprit.name = cause;
    culprit.ranks = cause_ranks(cause, directions);
    for (const auto& [s, d] : directions) explain(s, d);
    culprit.median_ratio = take_ratio();
    culprit.low = directions.size();
    culprit.total = std::max(culprit.low, directions_of(culprit.ranks));
    culprit.confidence = confidence(share(culprit.low, culprit.total), culprit.total);
    const std::vector<std::string> hosts = hosts_of(culprit.ranks);
    std::string where;
    if (hosts.size() == 1) where = fmt::format(" (host {})", hosts.front());
    culprit.evidence = fmt::format("{} of {} directions of {} failed with {}{}", culprit.low, culprit.total,
                                   ranks_text(culprit.ranks), cause, where);
    std::string targets = fmt::format("{}", fmt::join(hosts, ", "));
    if (hosts.empty()) targets = "the host of " + ranks_text(culprit.ranks);
    culprit.next =
        fmt::format("run {} on {} and fix what it reports ({})", settings_.siblings.diag_bind(), targets, cause);
    culprits_.push_back(std::move(culprit));
  }

  // 2. A leaf whose uplinks' directions are low while those inside it are fine.
  struct Leaf {
    std::string name;
    std::vector<int> ranks;
    std::size_t hosts = 0;
    std::size_t cross_bad = 0;
    std::size_t cross_total = 0;
    std::size_t inside_bad = 0;
    std::size_t inside_total = 0;
    double cross_share() const { return share(cross_bad, cross_total); }
    double inside_share() const { return share(inside_bad, inside_total); }
  };

  // The leaf of every rank (-1: the topology does not name its host), one lookup per host.
  std::vector<Leaf> leaves_of_ranks(std::vector<int>& leaf_of) const {
    std::vector<Leaf> leaves;
    std::map<std::string, int> index;
    std::vector<int> leaf_of_unit(units_.names.size(), -1);
    for (std::size_t u = 0; u < units_.names.size(); ++u) {
      const auto found = settings_.topology->leaf_of_host.find(units_.names[u]);
      if (found == settings_.topology->leaf_of_host.end()) continue;
      const auto [at, added] = index.emplace(found->second, static_cast<int>(leaves.size()));
      if (added) leaves.push_back(Leaf{found->second, {}, 0, 0, 0, 0, 0});
      leaf_of_unit[u] = at->second;
      ++leaves[static_cast<std::size_t>(at->second)].hosts;
    }
    leaf_of.assign(static_cast<std::size_t>(n_), -1);
    for (int rank = 0; rank < n_; ++rank) {
      const int leaf = leaf_of_unit[static_cast<std::size_t>(unit(rank))];
      leaf_of[static_cast<std::size_t>(rank)] = leaf;
      if (leaf >= 0) leaves[static_cast<std::size_t>(leaf)].ranks.push_back(rank);
    }
    return leaves;
  }

  void count_leaves(std::vector<Leaf>& leaves, const std::vector<int>& leaf_of) const {
    for (int s = 0; s < n_; ++s) {
      const int ls = leaf_of[static_cast<std::size_t>(s)];
      if (ls < 0) continue;
      for (int d = 0; d < n_; ++d) {
        const int ld = leaf_of[static_cast<std::size_t>(d)];
        const std::size_t at = cell(s, d);
        if (ld < 0 || s == d || !counted(at) || pool_[at] == explained) continue;
        const std::size_t bad = pool_[at] == low ? 1 : 0;
        if (ls != ld) {
          for (const int leaf : {ls, ld}) {
            leaves[static_cast<std::size_t>(leaf)].cross_total += 1;
            leaves[static_cast<std::size_t>(leaf)].cross_bad += bad;
          }
        } else if (unit(s) != unit(d)) {
          leaves[static_cast<std::size_t>(ls)].inside_total += 1;
          leaves[static_cast<std::size_t>(ls)].inside_bad += bad;
        }
      }
    }
  }

  // A leaf's inside directions are few (12 for 4 hosts): under a noisy rule their share of
  // low ones swings, so a share under half that the typical host's background gives often
  // enough is fine too (never a share of half or more: a bad node under a two-host leaf).
  bool inside_fine(const Leaf& leaf) const {
    return leaf.inside_share() <= fine_bar() ||
           (leaf.inside_share() < mostly_bad &&
            chance_of_at_least(leaf.inside_bad, leaf.inside_total, typical_) >= background_chance);
  }

  bool uplinks_low(const Leaf& leaf, std::size_t known_hosts) const {
    return leaf.hosts >= 2 && known_hosts > leaf.hosts && leaf.inside_total > 0 && leaf.cross_share() >= bad_bar() &&
           inside_fine(leaf);
  }

  void switches() {
    std::vector<int> leaf_of;
    std::vector<Leaf> leaves = leaves_of_ranks(leaf_of);
    count_leaves(leaves, leaf_of);
    std::size_t known_hosts = 0;
    for (const Leaf& leaf : leaves) known_hosts += leaf.hosts;
    while (true) {
      std::vector<std::size_t> candidates;
      for (std::size_t l = 0; l < leaves.size(); ++l) {
        if (uplinks_low(leaves[l], known_hosts)) candidates.push_back(l);
      }
      if (candidates.empty()) return;
      const std::size_t worst = *std::ranges::max_element(
          candidates, [&](std::size_t a, std::size_t b) { return leaves[a].cross_share() < leaves[b].cross_share(); });
      add_switch(leaves, leaf_of, worst, candidates, known_hosts);
    }
  }

  void add_switch(std::vector<Leaf>& leaves, const std::vector<int>& leaf_of, std::size_t worst,
                  const std::vector<std::size_t>& candidates, std::size_t known_hosts) {
    Leaf& leaf = leaves[worst];
    Culprit culprit;
    culprit.kind = CulpritKind::switch_uplinks;
    culprit.name = leaf.name;
    culprit.ranks = leaf.ranks;
    culprit.low = leaf.cross_bad;
    culprit.total = leaf.cross_total;
    const double separation = leaf.cross_share() - leaf.inside_share();
    const std::string inside =
        fmt::format("inside: {}/{} ({:.2f})", leaf.inside_bad, leaf.inside_total, leaf.inside_share());
    for (const int rank : leaf.ranks) {
      for (int other = 0; other < n_; ++other) {
        const int other_leaf = leaf_of[static_cast<std::size_t>(other)];
        if (other_leaf < 0 || other_leaf == static_cast<int>(worst)) continue;
        for (const std::size_t at : {cell(rank, other), cell(other, rank)}) {
          if (pool_[at] != low) continue;
          --leaf.cross_bad;
          --leaf.cross_total;
          --leaves[static_cast<std::size_t>(other_leaf)].cross_bad;
          --leaves[static_cast<std::size_t>(other_leaf)].cross_total;
        }
        explain(rank, other);
        explain(other, rank);
      }
    }
    culprit.median_ratio = take_ratio();
    // Another leaf that looked the same until this one explained its directions: with only
    // these two leaves between them, the matrix cannot tell which leaf's uplinks are at fault.
    std::vector<std::string> alike;
    for (const std::size_t l : candidates) {
      if (l != worst && !uplinks_low(leaves[l], known_hosts)) alike.push_back(leaves[l].name);
    }
    culprit.confidence = confidence(separation, culprit.total) * (alike.empty() ? 1.0 : 0.5);
    culprit.evidence = fmt::format("crossing: {}/{} ({:.2f}, {}), {}", culprit.low, culprit.total,
                                   share(culprit.low, culprit.total), ratio_text(culprit.median_ratio), inside);
    if (!alike.empty()) culprit.evidence += fmt::format("; {} looks the same from this mesh", fmt::join(alike, ", "));
    culprit.next = fmt::format("check {}'s uplink ports and counters", leaf.name);
    culprits_.push_back(std::move(culprit));
  }

  // The share of bad directions a host typically has (the median over units): "mostly bad"
  // must stand out from it, which keeps a noisy rule's background from naming nodes.
  double typical_share() const {
    std::vector<double> shares;
    for (const auto& ranks : units_.ranks) {
      Counts sum;
      for (const int rank : ranks) sum += rank_counts_[static_cast<std::size_t>(rank)];
      if (sum.total() > 0) shares.push_back(sum.fraction());
    }
    return median_of(std::move(shares));
  }

  double bad_bar() const { return std::clamp(typical_factor * typical_, mostly_bad, bad_bar_cap); }
  double fine_bar() const { return std::clamp(typical_fine * typical_, mostly_fine, fine_bar_cap); }

  Counts unit_counts(std::size_t u) const {
    Counts sum;
    for (const int rank : units_.ranks[u]) sum += rank_counts_[static_cast<std::size_t>(rank)];
    return sum;
  }

  // Other units this unit has a direction with (measured or failed).
  std::size_t partners(std::size_t u, std::vector<std::size_t>& stamp) const {
    std::size_t count = 0;
    for (const int rank : units_.ranks[u]) {
      for (int other = 0; other < n_; ++other) {
        const auto v = static_cast<std::size_t>(unit(other));
        if (v == u || stamp[v] == u + 1 || !(counted(cell(rank, other)) || counted(cell(other, rank)))) continue;
        stamp[v] = u + 1;
        ++count;
      }
    }
    return count;
  }

  // Why a unit's bad share is not one NIC's: a single rank, or at least two of its ranks bad.
  bool spread_over_ranks(std::size_t u) const {
    const auto& ranks = units_.ranks[u];
    if (ranks.size() == 1) return true;
    const auto bad = std::ranges::count_if(
        ranks, [&](int rank) { return rank_counts_[static_cast<std::size_t>(rank)].fraction() >= bad_bar(); });
    return bad >= 2;
  }

  // 3. A host (or rank) most of whose directions to and from the others are low, both ways.
  bool from_background(const Counts& unit) const {
    Counts all;
    for (const Counts& rank : rank_counts_) all += rank;
    const double p = share(all.bad() - unit.bad(), all.total() - unit.total());
    return chance_of_at_least(unit.out_bad, unit.out_total, p) * chance_of_at_least(unit.in_bad, unit.in_total, p) >
           background_chance;
  }

  void nodes() {
    std::vector<std::size_t> stamp(units_.names.size(), 0);
    std::vector<std::uint8_t> eligible(units_.names.size(), 0);
    for (std::size_t u = 0; u < units_.names.size(); ++u) eligible[u] = partners(u, stamp) >= 2 ? 1 : 0;
    while (true) {
      std::optional<std::size_t> worst;
      double worst_share = 0;
      for (std::size_t u = 0; u < units_.names.size(); ++u) {
        if (eligible[u] == 0) continue;
        const Counts sum = unit_counts(u);
        const double both = std::min(share(sum.out_bad, sum.out_total), share(sum.in_bad, sum.in_total));
        if (both < bad_bar() || !spread_over_ranks(u) || (worst && both <= worst_share) || from_background(sum))
          continue;
        worst = u;
        worst_share = both;
      }
      if (!worst) return;
      eligible[*worst] = 0;
      add_node(*worst, worst_share);
    }
  }

  void add_node(std::size_t u, double both) {
    const Counts sum = unit_counts(u);
    Culprit culprit;
    culprit.kind = CulpritKind::node;
    culprit.name = units_.names[u];
    culprit.ranks = units_.ranks[u];
    culprit.low = sum.bad();
    culprit.total = sum.total();
    for (const int rank : culprit.ranks) explain_rank(rank);
    culprit.median_ratio = take_ratio();
    culprit.confidence = confidence(both - typical_, culprit.total);
    const char* others = units_.by_host ? "other hosts" : "other ranks";
    culprit.evidence = fmt::format("{} of {} directions to and from {} low ({}): {}/{} as source, {}/{} as destination",
                                   culprit.low, culprit.total, others, ratio_text(culprit.median_ratio), sum.out_bad,
                                   sum.out_total, sum.in_bad, sum.in_total);
    culprit.next = units_.by_host ? fmt::format("check {}'s port counters (ethtool -S / perfquery) and run {} on it",
                                                culprit.name, settings_.siblings.diag_bind())
                                  : fmt::format(
                                        "check the port counters (ethtool -S / perfquery) of {}'s device "
                                        "and run {} on its host",
                                        culprit.name, settings_.siblings.diag_bind());
    culprits_.push_back(std::move(culprit));
  }

  // 4. One rank of a host with several (one per NIC) low while the host's others are fine.
  void nics() {
    for (std::size_t u = 0; u < units_.names.size(); ++u) {
      const auto& ranks = units_.ranks[u];
      if (ranks.size() < 2) continue;
      std::vector<int> bad;
      double worst_fine = 0;
      for (const int rank : ranks) {
        const double fraction = rank_counts_[static_cast<std::size_t>(rank)].fraction();
        if (fraction >= bad_bar()) {
          bad.push_back(rank);
        } else {
          worst_fine = std::max(worst_fine, fraction);
        }
      }
      if (bad.size() == 1 && worst_fine <= fine_bar()) add_nic(u, bad.front(), worst_fine);
    }
  }

  void add_nic(std::size_t u, int rank, double worst_fine) {
    const Counts own = rank_counts_[static_cast<std::size_t>(rank)];
    Counts siblings;
    for (const int other : units_.ranks[u]) {
      if (other != rank) siblings += rank_counts_[static_cast<std::size_t>(other)];
    }
    Culprit culprit;
    culprit.kind = CulpritKind::nic;
    culprit.name = nic_name(nodes_, rank);
    culprit.ranks = {rank};
    culprit.low = own.bad();
    culprit.total = own.total();
    explain_rank(rank);
    culprit.median_ratio = take_ratio();
    culprit.confidence = confidence(share(culprit.low, culprit.total) - worst_fine, culprit.total);
    culprit.evidence =
        fmt::format("rank {}: {} of {} directions low ({}); {}'s other ranks: {} of {} low", rank, culprit.low,
                    culprit.total, ratio_text(culprit.median_ratio), units_.names[u], siblings.bad(), siblings.total());
    const std::string device =
        rank < static_cast<int>(nodes_.size()) ? nodes_[static_cast<std::size_t>(rank)].device : std::string();
    culprit.next = fmt::format("check {} on {}", device.empty() ? "rank " + std::to_string(rank) + "'s device" : device,
                               units_.names[u]);
    culprits_.push_back(std::move(culprit));
  }

  // Ranks as their own units, for links between two NICs of hosts that run several.
  Units rank_units() const {
    Units ranks;
    ranks.by_host = true;
    for (int rank = 0; rank < n_; ++rank) {
      ranks.of_rank.push_back(rank);
      ranks.ranks.push_back({rank});
      ranks.names.push_back(nic_name(nodes_, rank));
    }
    return ranks;
  }

  // The directions between two units.
  struct Between {
    std::size_t a = 0;
    std::size_t b = 0;
    std::size_t bad_ab = 0;
    std::size_t bad_ba = 0;
    std::size_t total = 0;
    bool far = false;
    std::size_t bad() const { return bad_ab + bad_ba; }
  };

  // Every pair of units with a bad direction between them still unexplained.
  std::vector<Between> bad_pairs(const Units& by) const {
    std::vector<std::pair<std::uint64_t, std::size_t>> keyed;  // (a, b) as one key; the cell
    const auto count = static_cast<std::uint64_t>(by.names.size());
    for (int s = 0; s < n_; ++s) {
      for (int d = 0; d < n_; ++d) {
        const std::size_t at = cell(s, d);
        const auto us = static_cast<std::uint64_t>(by.of_rank[static_cast<std::size_t>(s)]);
        const auto ud = static_cast<std::uint64_t>(by.of_rank[static_cast<std::size_t>(d)]);
        if (pool_[at] != low || us == ud || unit(s) == unit(d)) continue;
        keyed.emplace_back(std::min(us, ud) * count + std::max(us, ud), at);
      }
    }
    std::ranges::sort(keyed);
    std::vector<Between> pairs;
    for (std::size_t i = 0; i < keyed.size(); ++i) {
      const std::size_t a = keyed[i].first / count;
      if (i == 0 || keyed[i].first != keyed[i - 1].first) pairs.push_back(Between{a, keyed[i].first % count});
      Between& pair = pairs.back();
      const std::size_t at = keyed[i].second;
      const auto source = static_cast<int>(at / static_cast<std::size_t>(n_));
      if (static_cast<std::size_t>(by.of_rank[static_cast<std::size_t>(source)]) == a) {
        ++pair.bad_ab;
      } else {
        ++pair.bad_ba;
      }
      if (matrix_.state[at] == CellState::failed || (bar_ && matrix_.has_figure(at) && bar_->far(matrix_.last[at])))
        pair.far = true;
    }
    return pairs;
  }

  Counts counts_of(const Units& by, std::size_t u) const {
    Counts sum;
    for (const int rank : by.ranks[u]) sum += rank_counts_[static_cast<std::size_t>(rank)];
    return sum;
  }

  void count_between(const Units& by, Between& pair) const {
    pair.total = 0;
    for (const int a : by.ranks[pair.a]) {
      for (const int b : by.ranks[pair.b]) {
        if (unit(a) == unit(b)) continue;
        pair.total += (live(cell(a, b)) ? 1U : 0U) + (live(cell(b, a)) ? 1U : 0U);
      }
    }
  }

  // The share of an end's other directions that are low. Directions a culprit already
  // explains (to a bad node, say) are not held against it.
  std::optional<double> elsewhere(const Units& by, std::size_t u, const Between& pair) const {
    const Counts sum = counts_of(by, u);
    const std::size_t total = sum.total() - pair.total;
    if (total < 2) return std::nullopt;
    return share(sum.bad() - pair.bad(), total);
  }

  // 5. A pair low between themselves while both ends are fine elsewhere.
  void links(const Units& by) {
    // The background once the named culprits' directions are set aside: quiet under our
    // rule, about a quarter of the directions under ClusterKit's on a +-5% matrix.
    const bool quiet = typical_fine * typical_share() <= mostly_fine;
    std::vector<Between> pairs = bad_pairs(by);
    for (Between& pair : pairs) count_between(by, pair);
    std::ranges::stable_sort(
        pairs, [](const Between& x, const Between& y) { return share(x.bad(), x.total) > share(y.bad(), y.total); });
    for (const Between& pair : pairs) {
      if (share(pair.bad(), pair.total) < mostly_bad) continue;
      const auto at_a = elsewhere(by, pair.a, pair);
      const auto at_b = elsewhere(by, pair.b, pair);
      if (!at_a || !at_b) continue;
      const double worst = std::max(*at_a, *at_b);
      // One low direction among noise is not a link: both ways low, or one far below. Where
      // the ends' background is itself high (a noisy rule), only far below or failed.
      const bool both_ways = pair.bad_ab > 0 && pair.bad_ba > 0;
      if ((quiet && worst <= mostly_fine && (both_ways || pair.far)) || (worst <= fine_bar() && pair.far))
        add_link(by, pair, worst);
    }
  }

  void add_link(const Units& by, const Between& pair, double worst_elsewhere) {
    Culprit culprit;
    culprit.kind = CulpritKind::link;
    culprit.name = by.names[pair.a] + " <-> " + by.names[pair.b];
    culprit.ranks = by.ranks[pair.a];
    culprit.ranks.insert(culprit.ranks.end(), by.ranks[pair.b].begin(), by.ranks[pair.b].end());
    std::ranges::sort(culprit.ranks);
    culprit.low = pair.bad();
    culprit.total = pair.total;
    const Counts at_a = counts_of(by, pair.a);
    const Counts at_b = counts_of(by, pair.b);
    const std::string ends =
        fmt::format("elsewhere {}: {} of {} low, {}: {} of {}", by.names[pair.a], at_a.bad() - pair.bad(),
                    at_a.total() - pair.total, by.names[pair.b], at_b.bad() - pair.bad(), at_b.total() - pair.total);
    for (const int a : by.ranks[pair.a]) {
      for (const int b : by.ranks[pair.b]) {
        explain(a, b);
        explain(b, a);
      }
    }
    culprit.median_ratio = take_ratio();
    culprit.confidence = confidence(share(culprit.low, culprit.total) - worst_elsewhere, culprit.total);
    culprit.evidence = fmt::format("{} of {} directions between them low ({}); {}", culprit.low, culprit.total,
                                   ratio_text(culprit.median_ratio), ends);
    culprit.next = fmt::format("check the cable/ports between {} and {}", by.names[pair.a], by.names[pair.b]);
    culprits_.push_back(std::move(culprit));
  }

  const TestMatrix& matrix_;
  const std::vector<Node>& nodes_;
  const LocateSettings& settings_;
  int n_ = 0;
  std::optional<Bar> bar_;
  // Per direction: fine, low (and not explained yet), or explained by a culprit named.
  static constexpr std::uint8_t low = 1;
  static constexpr std::uint8_t explained = 2;
  std::vector<std::uint8_t> pool_;
  Units units_;
  std::vector<Counts> rank_counts_;
  std::vector<std::size_t> directions_;  // per rank: its directions measured or failed
  double typical_ = 0;
  std::vector<double> ratios_;
  std::vector<Culprit> culprits_;
};

}  // namespace

std::vector<bool> bad_cells(const TestMatrix& matrix, const JudgeSettings& settings) {
  const std::vector<std::uint8_t> bad = judged(matrix, judge_bar(matrix, settings));
  return {bad.begin(), bad.end()};
}

std::vector<Culprit> locate_culprits(const TestMatrix& matrix, const std::vector<Node>& nodes,
                                     const LocateSettings& settings) {
  if (matrix.ranks < 2 || matrix.state.size() != matrix.cell_count()) return {};
  return Locator(matrix, nodes, settings).run();
}

}  // namespace rdmakit::mesh
