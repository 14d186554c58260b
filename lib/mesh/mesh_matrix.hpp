#pragma once
// rdma_mesh's figures as matrices: one per test, every ordered pair of ranks in one row-major
// array. The analysis and the culprits read this form whatever the report's size, live or
// from a saved report (rdma_mesh --analyse), so a 1024-rank mesh (1,047,552 directions) costs
// some 20 bytes a direction instead of a JSON object each.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "lib/mesh/mesh_node.hpp"
#include "lib/mesh/mesh_plan.hpp"

namespace rdmakit::mesh {

inline constexpr double no_figure = std::numeric_limits<double>::quiet_NaN();

enum class CellState : std::uint8_t { not_measured, measured, failed };

// A direction that has no figure: why.
struct Failure {
  int source = 0;
  int destination = 0;
  std::string cause;    // the diagnosed cause's code when a rank could not take part, else ""
  std::string message;  // the error's message
};

struct TestMatrix {
  std::string test;  // "bw", "lat", "cm"
  Better better = Better::higher;
  int ranks = 0;
  // [source * ranks + destination]; no_figure where the direction failed or was not measured.
  std::vector<double> first;  // the first attempt's figure
  std::vector<double> last;   // the last attempt's (the first's when never retested)
  std::vector<CellState> state;
  std::vector<std::uint8_t> retests;  // attempts after the first
  std::vector<Failure> failures;      // one per failed cell, in no set order

  TestMatrix() = default;
  TestMatrix(std::string name, Better better_is, int rank_count)
      : test(std::move(name)),
        better(better_is),
        ranks(rank_count),
        first(cell_count(), no_figure),
        last(cell_count(), no_figure),
        state(cell_count(), CellState::not_measured),
        retests(cell_count(), 0) {}

  std::size_t cell_count() const { return static_cast<std::size_t>(ranks) * static_cast<std::size_t>(ranks); }
  std::size_t index(int source, int destination) const {
    return static_cast<std::size_t>(source) * static_cast<std::size_t>(ranks) + static_cast<std::size_t>(destination);
  }
  bool has_figure(std::size_t cell) const { return !std::isnan(last[cell]); }
};

// Every test of one mesh, with the ranks they ran on.
struct MeshTable {
  int ranks = 0;
  std::vector<Node> nodes;  // by rank; may be shorter than `ranks` for a damaged report
  std::vector<TestMatrix> tests;

  const TestMatrix* find(const std::string& test) const {
    for (const auto& matrix : tests) {
      if (matrix.test == test) return &matrix;
    }
    return nullptr;
  }
  std::string host_of(int rank) const {
    return rank >= 0 && rank < static_cast<int>(nodes.size()) ? nodes[static_cast<std::size_t>(rank)].host
                                                              : std::string();
  }
};

}  // namespace rdmakit::mesh
