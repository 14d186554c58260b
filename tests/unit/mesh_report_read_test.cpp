#include "lib/mesh/mesh_report_read.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "lib/base/error.hpp"

namespace rdmakit::mesh {
namespace {

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

// Three ranks, bandwidth: 0->1 retested (first 100, then 900), 1->0 900, 2->0 failed
// because rank 2 could not take part; the rest 1000. Keys in the order the tool writes
// them (sorted), so "ranks" and "tests" come after "pairs".
std::string three_rank_report() {
  std::string pairs;
  const auto pair = [&](int s, int d, const std::string& figure, const std::string& final_figure,
                        const std::string& extra) {
    pairs +=
        (pairs.empty() ? "" : ",") + std::string("{\"cause\":") + (extra.empty() ? "null" : "\"" + extra + "\"") +
        ",\"destination\":" + std::to_string(d) +
        ",\"error\":" + (final_figure == "null" ? "{\"message\":\"rank 2 cannot take part\"}" : "null") +
        ",\"figure\":" + figure + ",\"figures\":{\"size\":4096,\"nested\":{\"a\":[1,2]}}" +
        ",\"final_figure\":" + final_figure + ",\"outcome\":\"completed\",\"retests\":[" +
        (figure != final_figure && final_figure != "null" ? "{\"figure\":" + final_figure + ",\"figures\":{}}" : "") +
        "],\"source\":" + std::to_string(s) + ",\"test\":\"bw\"}";
  };
  pair(0, 1, "100", "900", "");
  pair(1, 0, "900", "900", "");
  pair(0, 2, "1000", "1000", "");
  pair(2, 0, "null", "null", "netdev_without_rdma");
  pair(1, 2, "1000", "1000", "");
  pair(2, 1, "1000", "1000", "");
  return R"({"arguments":{"size":4096},"errors":[],"finished":true,"nodes":[{"rank":0,"host":"a","device":"rxe0"},)"
         R"({"rank":1,"host":"b"},{"rank":2,"host":"c","verdict":{"cause":"netdev_without_rdma"}}],"pairs":[)" +
         pairs +
         R"(],"ranks":3,"rounds":3,"rounds_completed":3,"summary":{"bw":{"outliers":[{"source":0}]}},"tests":["bw"],)"
         R"("tool":"rdma_mesh"})";
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
  const auto saved =
      read_text(R"({"tool":"rdma_mesh","ranks":2,"tests":["lat"],"form":"matrix","nodes":[],)"
                R"("matrices":{"lat":{"unit":"us","first":[[null,5.5],[null,null]],"final":[[null,4.5],[null,null]],)"
                R"("failures":[{"source":1,"destination":0,"cause":null,"message":"timed out"}]}}})");
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
  EXPECT_NE(refusal_of(R"({"tool":"rdma_mesh","ranks":2,"tests":["bw"]})").find("neither pairs nor matrices"),
            std::string::npos);
  EXPECT_NE(refusal_of(R"({"tool":"rdma_mesh","tests":["bw"],"pairs":[]})").find("no ranks count"), std::string::npos);
  EXPECT_NE(refusal_of(R"({"tool":"rdma_mesh","ranks":2,"tests":["bogus"],"pairs":[]})").find("not bw, lat or cm"),
            std::string::npos);
}

TEST(MeshReportRead, RefusesATruncatedReportWithWhereItEnds) {
  auto text = three_rank_report();
  text.resize(text.size() / 2);
  const auto refusal = refusal_of(text);
  EXPECT_NE(refusal.find("--analyse report.json: not a complete JSON document at byte"), std::string::npos) << refusal;
}

TEST(MeshReportRead, RefusesDirectionsThatDoNotFit) {
  EXPECT_NE(refusal_of(R"({"tool":"rdma_mesh","ranks":2,"tests":["bw"],"pairs":[{"source":0,"destination":5,)"
                       R"("test":"bw","figure":1,"final_figure":1}]})")
                .find("a direction 0->5 does not fit its 2 ranks"),
            std::string::npos);
  EXPECT_NE(refusal_of(R"({"tool":"rdma_mesh","ranks":2,"tests":["bw"],"pairs":[{"source":0,"destination":1,)"
                       R"("test":"lat","figure":1,"final_figure":1}]})")
                .find("test \"lat\", which its tests do not name"),
            std::string::npos);
  EXPECT_NE(
      refusal_of(R"({"tool":"rdma_mesh","ranks":3,"tests":["bw"],"matrices":{"bw":{"first":[[1]],"final":[[1]]}}})")
          .find("hold 1 and 1 cells, not 3 x 3"),
      std::string::npos);
}

// What a small hostile file could make the reader allocate or cast: a test named twice
// (a matrix of ranks x ranks cells each), ranks that are no whole number of range.
TEST(MeshReportRead, RefusesRepeatedTestsAndRanksThatAreNoWholeNumbers) {
  EXPECT_NE(refusal_of(R"({"tool":"rdma_mesh","ranks":2,"tests":["bw","lat","bw"],"pairs":[]})")
                .find("its tests name \"bw\" twice"),
            std::string::npos);
  // A few bytes that claim 16384 ranks in the per-direction form would have asked for
  // 16384 x 16384 cells a test: above 128 ranks that form must hold an eighth of them.
  EXPECT_NE(refusal_of(R"({"tool":"rdma_mesh","ranks":16384,"tests":["bw","lat","cm"],"pairs":[]})")
                .find("16384 ranks in the per-direction form with 0 of its 805257216 directions"),
            std::string::npos);
  for (const auto* rank : {"1e300", "-1e300", "1.5", "-1", "16384"}) {
    const auto refusal = refusal_of(std::string(R"({"tool":"rdma_mesh","ranks":2,"tests":["bw"],"pairs":[{"source":)") +
                                    rank + R"(,"destination":1,"test":"bw","figure":1,"final_figure":1}]})");
    EXPECT_NE(refusal.find("does not fit its 2 ranks"), std::string::npos) << rank << ": " << refusal;
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
