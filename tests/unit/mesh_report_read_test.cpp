#include "lib/mesh/mesh_report_read.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "lib/base/error.hpp"
#include "lib/mesh/mesh_json.hpp"

namespace rdmakit::mesh {
namespace {

// Not gtest's Test, which a TEST body would find first.
using MeshTest = rdmakit::mesh::Test;

SavedMesh read_text(const std::string& text) {
  std::istringstream in(text);
  return read_mesh_report(in, "report.json");
}

std::string refusal_of(const std::string& text) {
  try {
    read_text(text);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "(read without complaint)";
}

Attempt attempt_of(std::optional<double> figure) {
  return Attempt{
      .outcome = figure ? Outcome::completed : Outcome::failed,
      .figure = figure,
      .figures = {{"size", 4096}, {"nested", {{"a", {1, 2}}}}},
      .error = figure ? std::nullopt : std::optional(nlohmann::json::object({{"message", "rank 2 cannot take part"}}))};
}

// A direction as rdma_mesh writes it: first `figure`, then `retested` when it was retested.
nlohmann::json pair_record(int source, int destination, std::optional<double> figure,
                           std::optional<double> retested = std::nullopt, const std::string& cause = "",
                           MeshTest test = MeshTest::bandwidth) {
  Direction direction{.source = source,
                      .destination = destination,
                      .test = test,
                      .round = 1,
                      .cause = cause,
                      .first = attempt_of(figure),
                      .retests = {}};
  if (retested) direction.retests.push_back(attempt_of(retested));
  return to_json(PairRecord{.direction = direction,
                            .unit = std::string(unit_of(test)),
                            .outlier = false,
                            .final_outcome = direction.last().outcome,
                            .final_figure = direction.last().figure});
}

// The report's own keys; the caller adds its pairs or matrices.
nlohmann::json report_head(int ranks, std::vector<MeshTest> tests) {
  auto head = to_json(
      MeshHead{.ranks = ranks, .tests = std::move(tests), .rounds = 3, .rounds_completed = 3, .finished = true});
  head["tool"] = "rdma_mesh";
  return head;
}

std::string with_pair(const nlohmann::json& pair, int ranks = 2) {
  auto report = report_head(ranks, {MeshTest::bandwidth});
  report["pairs"] = nlohmann::json::array({pair});
  return report.dump();
}

// Three ranks, bandwidth: 0->1 retested (first 100, then 900), 1->0 900, 2->0 failed
// because rank 2 could not take part; the rest 1000. Keys in the order the tool writes
// them (sorted), so "ranks" and "tests" come after "pairs".
std::string three_rank_report() {
  auto report = report_head(3, {MeshTest::bandwidth});
  report["arguments"] = {{"size", 4096}};
  report["errors"] = nlohmann::json::array();
  report["nodes"] = nlohmann::json::parse(R"([{"rank":0,"host":"a","device":"rxe0"},{"rank":1,"host":"b"},
      {"rank":2,"host":"c","verdict":{"cause":"netdev_without_rdma"}}])");
  report["summary"] = nlohmann::json::parse(R"({"bw":{"outliers":[{"source":0}]}})");
  report["pairs"] = {pair_record(0, 1, 100, 900), pair_record(1, 0, 900),
                     pair_record(0, 2, 1000),     pair_record(2, 0, std::nullopt, std::nullopt, "netdev_without_rdma"),
                     pair_record(1, 2, 1000),     pair_record(2, 1, 1000)};
  return report.dump();
}

TEST(MeshReportRead, PerDirectionFormBecomesMatrices) {
  const auto saved = read_text(three_rank_report());
  EXPECT_EQ(saved.form, "pairs");
  EXPECT_EQ(saved.table.ranks, 3);
  EXPECT_TRUE(saved.finished);
  EXPECT_EQ(saved.rounds_completed, 3);
  EXPECT_EQ(saved.arguments.value("size", 0), 4096);
  ASSERT_EQ(saved.table.nodes.size(), 3U);
  EXPECT_EQ(saved.table.nodes[0].device, "rxe0");
  EXPECT_EQ(saved.table.host_of(2), "c");
  ASSERT_EQ(saved.table.tests.size(), 1U);
  const auto& bw = saved.table.tests[0];
  EXPECT_EQ(bw.test, "bw");
  EXPECT_EQ(bw.better, Better::higher);
  EXPECT_DOUBLE_EQ(bw.first[bw.index(0, 1)], 100);
  EXPECT_DOUBLE_EQ(bw.last[bw.index(0, 1)], 900);
  EXPECT_EQ(bw.retests[bw.index(0, 1)], 1);
  EXPECT_EQ(bw.retests[bw.index(1, 0)], 0);
  EXPECT_EQ(bw.state[bw.index(0, 0)], CellState::not_measured);
  EXPECT_EQ(bw.state[bw.index(1, 2)], CellState::measured);
  EXPECT_EQ(bw.state[bw.index(2, 0)], CellState::failed);
  EXPECT_FALSE(bw.has_figure(bw.index(2, 0)));
  ASSERT_EQ(bw.failures.size(), 1U);
  EXPECT_EQ(bw.failures[0].source, 2);
  EXPECT_EQ(bw.failures[0].destination, 0);
  EXPECT_EQ(bw.failures[0].cause, "netdev_without_rdma");
  EXPECT_EQ(bw.failures[0].message, "rank 2 cannot take part");
}

TEST(MeshReportRead, MatrixForm) {
  auto report = report_head(2, {MeshTest::latency});
  report["form"] = "matrix";
  report["nodes"] = nlohmann::json::array();
  report["matrices"] =
      nlohmann::json::parse(R"({"lat":{"unit":"us","first":[[null,5.5],[null,null]],"final":[[null,4.5],[null,null]],)"
                            R"("failures":[{"source":1,"destination":0,"cause":null,"message":"timed out"}]}})");
  const auto saved = read_text(report.dump());
  EXPECT_EQ(saved.form, "matrix");
  const auto& lat = saved.table.tests.at(0);
  EXPECT_EQ(lat.better, Better::lower);
  EXPECT_DOUBLE_EQ(lat.first[lat.index(0, 1)], 5.5);
  EXPECT_DOUBLE_EQ(lat.last[lat.index(0, 1)], 4.5);
  EXPECT_EQ(lat.retests[lat.index(0, 1)], 1);
  EXPECT_EQ(lat.state[lat.index(0, 1)], CellState::measured);
  EXPECT_EQ(lat.state[lat.index(1, 0)], CellState::failed);
  EXPECT_EQ(lat.state[lat.index(0, 0)], CellState::not_measured);
  ASSERT_EQ(lat.failures.size(), 1U);
  EXPECT_EQ(lat.failures[0].message, "timed out");
}

TEST(MeshReportRead, RefusesWhatIsNotAMeshReport) {
  EXPECT_NE(refusal_of(R"({"tool":"send_bw","rows":[]})").find("not an rdma_mesh report (its tool is send_bw)"),
            std::string::npos);
  EXPECT_NE(refusal_of(R"([1,2])").find("not an rdma_mesh report"), std::string::npos);
  EXPECT_EQ(refusal_of(report_head(2, {MeshTest::bandwidth}).dump()),
            "--analyse report.json: it has neither pairs nor matrices");
  auto no_ranks = report_head(2, {MeshTest::bandwidth});
  no_ranks.erase("ranks");
  no_ranks["pairs"] = nlohmann::json::array();
  EXPECT_EQ(refusal_of(no_ranks.dump()), "--analyse report.json: it has no ranks count");
  no_ranks["ranks"] = "two";
  EXPECT_EQ(refusal_of(no_ranks.dump()), "--analyse report.json: ranks: expected an integer");
  auto bogus = nlohmann::json::parse(with_pair(pair_record(0, 1, 1)));
  bogus["tests"] = {"bogus"};
  EXPECT_EQ(refusal_of(bogus.dump()), "--analyse report.json: tests[0]: 'bogus' is not one of bw, lat, cm");
}

// Each record is read by the description it was written with: a key left out, or of the
// wrong type, is refused naming where it is.
TEST(MeshReportRead, RefusesARecordItWouldNotWrite) {
  auto pair = pair_record(0, 1, 1);
  pair.erase("final_outcome");
  EXPECT_EQ(refusal_of(with_pair(pair)), "--analyse report.json: pairs[0].final_outcome: missing");
  pair = pair_record(0, 1, 1);
  pair["figure"] = "fast";
  EXPECT_EQ(refusal_of(with_pair(pair)), "--analyse report.json: pairs[0].figure: expected a number");
  pair = pair_record(0, 1, 1);
  pair["retests"] = {{{"outcome", "completed"}}};
  EXPECT_EQ(refusal_of(with_pair(pair)), "--analyse report.json: pairs[0].retests[0].figure: missing");
  auto report = report_head(2, {MeshTest::latency});
  report["matrices"] = nlohmann::json::parse(
      R"({"lat":{"unit":"us","first":[[null,5.5],[null,"x"]],"final":[[null,4.5],[null,null]],"failures":[]}})");
  EXPECT_EQ(refusal_of(report.dump()), "--analyse report.json: matrices.lat.first[1][1]: expected a number");
  report["matrices"]["lat"]["first"][1][1] = nullptr;
  report["matrices"]["lat"].erase("failures");  // the fuzzer's first find: refused, not thrown past the reader
  EXPECT_EQ(refusal_of(report.dump()), "--analyse report.json: matrices.lat.failures: missing");
  report["matrices"]["lat"]["failures"] = {{{"source", 1}, {"destination", 0}}};
  EXPECT_EQ(refusal_of(report.dump()), "--analyse report.json: matrices.lat.failures[0].cause: missing");
}

TEST(MeshReportRead, RefusesATruncatedReportWithWhereItEnds) {
  auto text = three_rank_report();
  text.resize(text.size() / 2);
  const auto refusal = refusal_of(text);
  EXPECT_NE(refusal.find("--analyse report.json: not a complete JSON document at byte"), std::string::npos) << refusal;
}

TEST(MeshReportRead, RefusesDirectionsThatDoNotFit) {
  EXPECT_NE(refusal_of(with_pair(pair_record(0, 5, 1))).find("a direction 0->5 does not fit its 2 ranks"),
            std::string::npos);
  EXPECT_NE(refusal_of(with_pair(pair_record(0, 1, 1, std::nullopt, "", MeshTest::latency)))
                .find("test \"lat\", which its tests do not name"),
            std::string::npos);
  auto report = report_head(3, {MeshTest::bandwidth});
  report["matrices"] = nlohmann::json::parse(R"({"bw":{"unit":"MiB/s","first":[[1]],"final":[[1]],"failures":[]}})");
  EXPECT_NE(refusal_of(report.dump()).find("hold 1 and 1 cells, not 3 x 3"), std::string::npos);
  // Three rows of three cells between them, which is not three rows of three.
  report["matrices"]["bw"]["first"] = {{1, 1, 1, 1}, {1, 1}, {1, 1, 1}};
  report["matrices"]["bw"]["final"] = report["matrices"]["bw"]["first"];
  EXPECT_NE(refusal_of(report.dump()).find("hold 9 and 9 cells, not 3 x 3"), std::string::npos);
}

// What a small hostile file could make the reader allocate or cast: a test named twice
// (a matrix of ranks x ranks cells each), ranks that are no whole number of range.
TEST(MeshReportRead, RefusesRepeatedTestsAndRanksThatAreNoWholeNumbers) {
  auto report = report_head(2, {MeshTest::bandwidth, MeshTest::latency, MeshTest::bandwidth});
  report["pairs"] = nlohmann::json::array();
  EXPECT_NE(refusal_of(report.dump()).find("its tests name \"bw\" twice"), std::string::npos);
  // A few bytes that claim 16384 ranks in the per-direction form would have asked for
  // 16384 x 16384 cells a test: above 128 ranks that form must hold an eighth of them.
  report = report_head(16384, {MeshTest::bandwidth, MeshTest::latency, MeshTest::connect});
  report["pairs"] = nlohmann::json::array();
  EXPECT_NE(refusal_of(report.dump()).find("16384 ranks in the per-direction form with 0 of its 805257216 directions"),
            std::string::npos);
  for (const auto* rank : {"1e300", "-1e300", "1.5"}) {
    auto pair = pair_record(0, 1, 1);
    pair["source"] = nlohmann::json::parse(rank);
    EXPECT_EQ(refusal_of(with_pair(pair)), "--analyse report.json: pairs[0].source: expected an integer") << rank;
  }
  EXPECT_EQ(refusal_of(with_pair(pair_record(0, 1, 1))), "(read without complaint)");
  for (const int rank : {-1, 2, 16384}) {
    EXPECT_NE(refusal_of(with_pair(pair_record(rank, 1, 1))).find("does not fit its 2 ranks"), std::string::npos)
        << rank;
  }
}

TEST(MeshReportRead, ReadsTheSavedSamples) {
  for (const auto* name : {"rdma_mesh-rxe-5-ranks-outliers.json", "rdma_mesh-netdev-without-rdma.json"}) {
    std::ifstream in(std::string(RDMAKIT_SOURCE_DIR) + "/tests/schema/samples/" + name);
    ASSERT_TRUE(in) << name;
    const auto saved = read_mesh_report(in, name);
    EXPECT_EQ(saved.form, "pairs");
    EXPECT_GT(saved.table.ranks, 0);
    std::size_t cells = 0;
    for (const auto& matrix : saved.table.tests) {
      for (const auto state : matrix.state) cells += state != CellState::not_measured ? 1 : 0;
    }
    EXPECT_GT(cells, 0U) << name;
  }
}

}  // namespace
}  // namespace rdmakit::mesh
