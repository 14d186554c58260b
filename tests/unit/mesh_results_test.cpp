// rdma_mesh's stored analysis (lib/mesh/mesh_results): made once per round, and the
// report's pairs, summary, text and exit code all read it, so they agree at every round.

#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "lib/mesh/rdma_mesh_session.hpp"

namespace rdmakit::mesh {
namespace {

Attempt measured(double figure) {
  return Attempt{.outcome = Outcome::completed, .figure = figure, .figures = nlohmann::json::object(), .error = {}};
}

Attempt failed() {
  return Attempt{.outcome = Outcome::failed,
                 .figure = std::nullopt,
                 .figures = nlohmann::json::object(),
                 .error = {{"message", "no answer"}}};
}

Direction direction(int source, int destination, Attempt first) {
  return Direction{.source = source,
                   .destination = destination,
                   .test = mesh::Test::bandwidth,
                   .round = 1,
                   .cause = {},
                   .first = std::move(first),
                   .retests = {}};
}

// Three ranks, bandwidth both ways: 2->0 is slow, 2->1 failed.
MeshResults three_ranks() {
  MeshResults results;
  results.ranks = 3;
  results.tests = {mesh::Test::bandwidth};
  results.rounds = 3;
  results.rounds_completed = 3;
  results.directions = {direction(0, 1, measured(1000)), direction(1, 0, measured(1000)),
                        direction(0, 2, measured(1000)), direction(2, 0, measured(400)),
                        direction(1, 2, measured(1000)), direction(2, 1, failed())};
  return results;
}

using PairSet = std::set<std::pair<int, int>>;

PairSet flagged_pairs(const nlohmann::json& document) {
  PairSet pairs;
  for (const auto& pair : document.at("pairs")) {
    if (pair.at("outlier").get<bool>()) pairs.insert({pair.at("source").get<int>(), pair.at("destination").get<int>()});
  }
  return pairs;
}

PairSet summary_outliers(const nlohmann::json& document) {
  PairSet pairs;
  for (const auto& outlier : document.at("summary").at("bw").at("outliers")) {
    pairs.insert({outlier.at("source").get<int>(), outlier.at("destination").get<int>()});
  }
  return pairs;
}

TEST(MeshResults, PairsAndSummaryNameTheSameOutliersMidRun) {
  auto results = three_ranks();
  results.analyse();
  results.finished = false;  // as in the --json-file rewritten after a round
  nlohmann::json document;
  results.add_to(document);
  EXPECT_EQ(flagged_pairs(document), (PairSet{{2, 0}}));
  EXPECT_EQ(summary_outliers(document), flagged_pairs(document));
  EXPECT_EQ(document.at("summary").at("bw").at("measured"), 5);
  EXPECT_EQ(document.at("summary").at("bw").at("failed"), 1);
  EXPECT_EQ(results.outlier_flags(), (std::vector<bool>{false, false, false, true, false, false}));
  EXPECT_FALSE(results.all_good());
  EXPECT_NE(results.text().find("*400"), std::string::npos);
}

TEST(MeshResults, TheStoredAnalysisIsWhatTheReportShowsUntilTheNextRound) {
  auto results = three_ranks();
  results.directions.erase(results.directions.begin() + 4);  // 1->2, measured in a later round
  results.analyse();
  // A later round's direction is not in the report until that round is analysed.
  results.directions.push_back(direction(1, 2, measured(100)));
  nlohmann::json before;
  results.add_to(before);
  EXPECT_EQ(before.at("summary").at("bw").at("measured"), 4);
  EXPECT_EQ(summary_outliers(before), (PairSet{{2, 0}}));
  results.analyse();
  nlohmann::json after;
  results.add_to(after);
  EXPECT_EQ(after.at("summary").at("bw").at("measured"), 5);
  EXPECT_EQ(summary_outliers(after), (PairSet{{2, 0}, {1, 2}}));
  EXPECT_EQ(flagged_pairs(after), summary_outliers(after));
}

TEST(MeshResults, ARetestJudgedAgainstTheFirstPassMedian) {
  auto results = three_ranks();
  results.directions[3].retests.push_back(measured(950));
  results.directions[5].retests.push_back(measured(1000));
  // Retests run alone and may be faster: they must not raise the bar for the others.
  results.directions[4].retests.push_back(measured(5000));
  results.analyse();
  const auto& judged = results.analysis_of(mesh::Test::bandwidth);
  ASSERT_TRUE(judged.first_pass_median);
  EXPECT_DOUBLE_EQ(*judged.first_pass_median, 1000);
  EXPECT_TRUE(judged.analysis.outliers.empty());
  EXPECT_TRUE(results.all_good());
  nlohmann::json document;
  results.add_to(document);
  EXPECT_TRUE(flagged_pairs(document).empty());
  EXPECT_DOUBLE_EQ(document.at("summary").at("bw").at("first_pass_median").get<double>(), 1000);
}

TEST(MeshResults, BeforeAnyAnalysisTheSummaryIsEmpty) {
  MeshResults results;
  results.tests = {mesh::Test::latency};
  nlohmann::json document;
  results.add_to(document);
  EXPECT_EQ(document.at("summary").at("lat").at("unit"), "us");
  EXPECT_EQ(document.at("summary").at("lat").at("measured"), 0);
  EXPECT_TRUE(results.all_good());
}

}  // namespace
}  // namespace rdmakit::mesh
