#include "lib/mesh/mesh_plan.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/base/named_values.hpp"

namespace rdmakit::mesh {
namespace {

RankPair ordered(int a, int b) {
  return a < b ? RankPair{a, b} : RankPair{b, a};
}

// The circle method's pairs for one arrangement: the first seat meets the last, the second
// the one before last, and so on. A pair with the bye seat (odd counts) is a rank sitting out.
Round pairs_facing(const std::vector<int>& seats, int bye) {
  Round round;
  const std::size_t count = seats.size();
  for (std::size_t i = 0; i < count / 2; ++i) {
    const int a = seats[i];
    const int b = seats[count - 1 - i];
    if (a != bye && b != bye) round.push_back(ordered(a, b));
  }
  return round;
}

// The rest of one line of the pair list, read from the left.
class LineScanner {
 public:
  explicit LineScanner(std::string_view text) : rest_(text) {}

  void skip_spaces() {
    while (!rest_.empty() && (rest_.front() == ' ' || rest_.front() == '\t')) rest_.remove_prefix(1);
  }
  // The run of digits here (empty when there is none).
  std::string_view digits() {
    std::size_t length = 0;
    while (length < rest_.size() && rest_[length] >= '0' && rest_[length] <= '9') ++length;
    const std::string_view run = rest_.substr(0, length);
    rest_.remove_prefix(length);
    return run;
  }
  bool accept_any_of(std::string_view characters) {
    if (rest_.empty() || characters.find(rest_.front()) == std::string_view::npos) return false;
    rest_.remove_prefix(1);
    return true;
  }
  bool at_end() const { return rest_.empty(); }

 private:
  std::string_view rest_;
};

std::string_view without_comment(std::string_view line) {
  const std::size_t hash = line.find('#');
  if (hash != std::string_view::npos) line = line.substr(0, hash);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  return line;
}

[[noreturn]] void refuse_line(std::size_t line_number, const std::string& why) {
  throw UsageError("line " + std::to_string(line_number) + ": " + why);
}

int rank_in_range(std::string_view digits, int ranks, std::size_t line_number) {
  int rank = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
  if (error != std::errc{} || end != digits.data() + digits.size() || rank >= ranks) {
    refuse_line(line_number, "rank " + std::string(digits) + " is outside 0.." + std::to_string(ranks - 1) + " (" +
                                 std::to_string(ranks) + " ranks)");
  }
  return rank;
}

// One non-blank line without its comment: two rank numbers apart by spaces, ',' or '-'.
RankPair parse_pair_line(std::string_view line, int ranks, std::size_t line_number) {
  LineScanner scanner(line);
  scanner.skip_spaces();
  const std::string_view first = scanner.digits();
  scanner.skip_spaces();
  if (scanner.accept_any_of(",-")) scanner.skip_spaces();
  const std::string_view second = scanner.digits();
  scanner.skip_spaces();
  if (first.empty() || second.empty() || !scanner.at_end()) {
    refuse_line(line_number,
                "expected two rank numbers (\"3 7\", \"3,7\" or \"3-7\"), got \"" + std::string(line) + "\"");
  }
  const int a = rank_in_range(first, ranks, line_number);
  const int b = rank_in_range(second, ranks, line_number);
  if (a == b) refuse_line(line_number, "rank " + std::to_string(a) + " is paired with itself");
  return ordered(a, b);
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const std::size_t newline = text.find('\n');
    lines.push_back(text.substr(0, newline));
    text = newline == std::string_view::npos ? std::string_view{} : text.substr(newline + 1);
  }
  return lines;
}

// Whether `a` is worse than `b`: lower bandwidth, longer time.
bool worse(double a, double b, Better better) {
  return better == Better::higher ? a < b : a > b;
}

void add_spread(const std::vector<Sample>& samples, Analysis& analysis) {
  std::vector<double> values;
  for (const Sample& sample : samples) {
    if (sample.figure) values.push_back(*sample.figure);
  }
  analysis.measured = values.size();
  analysis.failed = samples.size() - values.size();
  if (values.empty()) return;
  const auto [lowest, highest] = std::minmax_element(values.begin(), values.end());
  analysis.min = *lowest;
  analysis.max = *highest;
  analysis.median = median_of(std::move(values));
}

void add_slowest(const std::vector<Sample>& samples, const AnalysisSettings& settings, Analysis& analysis) {
  std::vector<std::size_t> measured;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].figure) measured.push_back(i);
  }
  std::stable_sort(measured.begin(), measured.end(), [&](std::size_t a, std::size_t b) {
    return worse(*samples[a].figure, *samples[b].figure, settings.better);
  });
  if (measured.size() > settings.slowest_count) measured.resize(settings.slowest_count);
  analysis.slowest = std::move(measured);
}

void add_outliers(const std::vector<Sample>& samples, const AnalysisSettings& settings, Analysis& analysis) {
  const auto reference = settings.reference_median ? settings.reference_median : analysis.median;
  if (!reference) return;
  const double median = *reference;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const std::optional<double>& figure = samples[i].figure;
    if (figure && is_outlier(*figure, median, settings)) analysis.outliers.push_back({i, *figure / median});
  }
  std::stable_sort(analysis.outliers.begin(), analysis.outliers.end(),
                   [&](const Outlier& a, const Outlier& b) { return worse(a.ratio, b.ratio, settings.better); });
}

// What one rank's links add up to, for the node-problem test.
struct RankLinks {
  std::size_t links = 0;
  std::size_t bad = 0;  // failed or outliers
  std::set<int> partners;
};

void count_link(RankLinks& links, int partner, bool bad) {
  ++links.links;
  if (bad) ++links.bad;
  links.partners.insert(partner);
}

void add_node_problems(const std::vector<Sample>& samples, Analysis& analysis) {
  std::vector<bool> bad(samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) bad[i] = !samples[i].figure;
  for (const Outlier& outlier : analysis.outliers) bad[outlier.sample] = true;

  std::map<int, RankLinks> by_rank;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const Sample& sample = samples[i];
    if (sample.source == sample.destination) continue;
    count_link(by_rank[sample.source], sample.destination, bad[i]);
    count_link(by_rank[sample.destination], sample.source, bad[i]);
  }
  for (const auto& [rank, links] : by_rank) {
    if (links.bad == links.links && links.partners.size() >= 2) analysis.node_problems.push_back({rank, links.links});
  }
}

}  // namespace

std::vector<Round> round_robin(int ranks) {
  if (ranks < 2) return {};
  const int bye = ranks;  // only seated when the count is odd
  std::vector<int> seats(static_cast<std::size_t>(ranks % 2 == 0 ? ranks : ranks + 1));
  std::iota(seats.begin(), seats.end(), 0);
  std::vector<Round> rounds;
  for (std::size_t round = 0; round + 1 < seats.size(); ++round) {
    rounds.push_back(pairs_facing(seats, bye));
    // Seat 0 stays; everyone else moves one seat on.
    std::rotate(seats.begin() + 1, seats.end() - 1, seats.end());
  }
  return rounds;
}

std::vector<Round> one_per_round(const std::vector<RankPair>& pairs) {
  std::vector<Round> rounds;
  rounds.reserve(pairs.size());
  for (const RankPair& pair : pairs) rounds.push_back({pair});
  return rounds;
}

std::vector<Round> pack_rounds(const std::vector<RankPair>& pairs) {
  std::vector<Round> rounds;
  std::vector<std::set<int>> busy;  // the ranks each round already uses
  for (const RankPair& pair : pairs) {
    const auto is_free = [&](const std::set<int>& used) {
      return !used.contains(pair.low) && !used.contains(pair.high);
    };
    const auto round = static_cast<std::size_t>(std::find_if(busy.begin(), busy.end(), is_free) - busy.begin());
    if (round == rounds.size()) {
      rounds.emplace_back();
      busy.emplace_back();
    }
    rounds[round].push_back(pair);
    busy[round].insert({pair.low, pair.high});
  }
  return rounds;
}

Round quick_round(int ranks) {
  Round round;
  const int half = ranks / 2;
  for (int rank = 0; rank < half; ++rank) round.push_back({rank, rank + half});
  return round;
}

std::optional<int> quick_left_out(int ranks) {
  if (ranks % 2 == 0) return std::nullopt;
  return ranks - 1;
}

std::string_view to_string(RetestEnd end) {
  return name_in(retest_end_names, end, "?");
}

std::optional<std::vector<Round>> RetestSchedule::next(const std::vector<RankPair>& flagged) {
  if (end_ != RetestEnd::running) return std::nullopt;
  if (flagged.empty()) {
    end_ = RetestEnd::cleared;
  } else if (passes_ > 0 && flagged.size() >= last_size_) {
    end_ = RetestEnd::no_smaller;
  } else if (passes_ >= cap_) {
    end_ = RetestEnd::cap;
  }
  if (end_ != RetestEnd::running) return std::nullopt;
  ++passes_;
  last_size_ = flagged.size();
  return serial_ ? one_per_round(flagged) : pack_rounds(flagged);
}

std::vector<RankPair> parse_pair_list(std::string_view text, int ranks) {
  std::vector<RankPair> pairs;
  std::set<std::pair<int, int>> seen;
  const std::vector<std::string_view> lines = lines_of(text);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string_view line = without_comment(lines[i]);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const RankPair pair = parse_pair_line(line, ranks, i + 1);
    if (seen.insert({pair.low, pair.high}).second) pairs.push_back(pair);
  }
  if (pairs.empty()) {
    throw UsageError(lines.empty() ? std::string("no pair: the list is empty")
                                   : "no pair in lines 1-" + std::to_string(lines.size()) + ": all blank or comments");
  }
  return pairs;
}

Analysis analyse(const std::vector<Sample>& samples, const AnalysisSettings& settings) {
  Analysis analysis;
  add_spread(samples, analysis);
  add_slowest(samples, settings, analysis);
  add_outliers(samples, settings, analysis);
  add_node_problems(samples, analysis);
  return analysis;
}

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  if (values.size() % 2 == 1) return values[middle];
  return (values[middle - 1] + values[middle]) / 2;
}

std::optional<double> median_of_figures(const std::vector<Sample>& samples) {
  std::vector<double> values;
  for (const Sample& sample : samples) {
    if (sample.figure) values.push_back(*sample.figure);
  }
  if (values.empty()) return std::nullopt;
  return median_of(std::move(values));
}

bool is_outlier(double figure, double median, const AnalysisSettings& settings) {
  const double limit = settings.threshold * median;
  return settings.better == Better::higher ? figure < limit : figure > limit;
}

namespace {

// Ranks grouped by a key, the groups in the order their first rank comes.
using Groups = std::vector<std::pair<std::string, std::vector<int>>>;

void add_to_group(Groups& groups, const std::string& key, int rank) {
  const auto found = std::ranges::find_if(groups, [&key](const auto& group) { return group.first == key; });
  if (found == groups.end()) {
    groups.push_back({key, {rank}});
  } else {
    found->second.push_back(rank);
  }
}

std::string groups_text(const Groups& groups) {
  std::string text;
  for (const auto& [key, ranks] : groups) {
    std::string list;
    for (const auto rank : ranks) list += (list.empty() ? "" : ", ") + std::to_string(rank);
    text += fmt::format("{}{} on rank{} {}", text.empty() ? "" : "; ", key, ranks.size() == 1 ? "" : "s", list);
  }
  return text;
}

}  // namespace

std::vector<std::string> mixed_fabric(const std::vector<Node>& nodes) {
  Groups types;
  Groups families;
  for (const auto& node : nodes) {
    if (!node.gid_type.empty()) add_to_group(types, node.gid_type, node.rank);
    // The address is a bare numeric host: only IPv6 has colons.
    if (!node.address.empty()) {
      add_to_group(families, node.address.find(':') == std::string::npos ? "IPv4" : "IPv6", node.rank);
    }
  }
  std::vector<std::string> lines;
  if (types.size() > 1) lines.push_back("mixed fabric: GID types differ: " + groups_text(types));
  if (families.size() > 1) lines.push_back("mixed fabric: address families differ: " + groups_text(families));
  return lines;
}

}  // namespace rdmakit::mesh
