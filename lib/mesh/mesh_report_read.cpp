#include "lib/mesh/mesh_report_read.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/base/json_stream.hpp"
#include "lib/mesh/mesh_json.hpp"

namespace rdmakit::mesh {

namespace {

using json = nlohmann::json;

// A ranks count this large is a damaged file, not a cluster: its matrices would not fit.
constexpr int most_ranks = 16384;

// One direction of the per-direction form as the analysis keeps it while the file streams
// by: its ranks and figures, not the record (a 1024-rank report has a million of them, and
// its ranks and tests come after them, in the keys' order).
struct StoredPair {
  int source;
  int destination;
  Test test;
  std::uint8_t retests;
  double first;
  double last;
};

// One test's matrices as their rows stream by.
struct StreamedMatrix {
  std::vector<double> first;
  std::vector<double> last;
  std::size_t first_rows = 0;
  std::size_t last_rows = 0;
  std::size_t widest_row = 0;
  std::size_t narrowest_row = SIZE_MAX;
  std::vector<Failure> failures;
};

double figure_or_none(const std::optional<double>& figure) {
  return figure.value_or(no_figure);
}

// What the report's long lists hold, taken one element at a time (lib/base/json_stream).
class Directions {
 public:
  // `path`: {"pairs", index} or {"matrices", test, "first" | "final" | "failures", index}.
  void take(const std::vector<std::string>& path, const json& value) {
    std::size_t index = 0;
    std::from_chars(path.back().data(), path.back().data() + path.back().size(), index);
    if (path.front() == "pairs") {
      take_pair(pair_from_json(value, described::Path(pairs_path_, index)));
      return;
    }
    const described::Path matrix(matrices_path_, path[1]);
    const described::Path list(matrix, path[2]);
    if (path[2] == "failures") {
      matrices_[path[1]].failures.push_back(failure_from_json(value, described::Path(list, index)));
    } else {
      take_row(matrices_[path[1]], path[2] == "first", matrix_row_from_json(value, described::Path(list, index)));
    }
  }

  std::vector<StoredPair>& pairs() { return pairs_; }
  std::vector<Failure>& failed_pairs(Test test) { return failed_pairs_[static_cast<std::size_t>(test)]; }
  std::map<std::string, StreamedMatrix>& matrices() { return matrices_; }

 private:
  void take_pair(PairRecord pair) {
    auto& direction = pair.direction;
    pairs_.push_back(
        StoredPair{.source = direction.source,
                   .destination = direction.destination,
                   .test = direction.test,
                   .retests = static_cast<std::uint8_t>(std::min<std::size_t>(direction.retests.size(), 255)),
                   .first = figure_or_none(direction.first.figure),
                   .last = figure_or_none(pair.final_figure)});
    if (!pair.final_figure) {
      const auto& error = direction.last().error;
      failed_pairs(direction.test)
          .push_back(Failure{.source = direction.source,
                             .destination = direction.destination,
                             .cause = std::move(direction.cause),
                             .message = error ? error->value("message", std::string()) : std::string()});
    }
  }

  static void take_row(StreamedMatrix& matrix, bool first, const MatrixRow& row) {
    auto& cells = first ? matrix.first : matrix.last;
    for (const auto& figure : row) cells.push_back(figure_or_none(figure));
    ++(first ? matrix.first_rows : matrix.last_rows);
    matrix.widest_row = std::max(matrix.widest_row, row.size());
    matrix.narrowest_row = std::min(matrix.narrowest_row, row.size());
  }

  const described::Path pairs_path_{"pairs"};
  const described::Path matrices_path_{"matrices"};
  std::vector<StoredPair> pairs_;
  std::array<std::vector<Failure>, test_names.size()> failed_pairs_;
  std::map<std::string, StreamedMatrix> matrices_;
};

Better better_of(Test test) {
  return test == Test::bandwidth ? Better::higher : Better::lower;
}

[[noreturn]] void refuse(const std::string& origin, const std::string& why) {
  throw UsageError(fmt::format("--analyse {}: {}", origin, why));
}

void check_direction(const std::string& origin, int source, int destination, int ranks) {
  if (source < 0 || source >= ranks || destination < 0 || destination >= ranks || source == destination) {
    refuse(origin, fmt::format("a direction {}->{} does not fit its {} ranks", source, destination, ranks));
  }
}

std::vector<TestMatrix> from_pairs(Directions& read, const std::vector<Test>& tests, int ranks,
                                   const std::string& origin) {
  std::vector<TestMatrix> matrices;
  matrices.reserve(tests.size());
  for (const auto test : tests) matrices.emplace_back(std::string(to_string(test)), better_of(test), ranks);
  const auto matrix_of = [&](Test test) -> TestMatrix& {
    const auto found = std::ranges::find(tests, test);
    if (found == tests.end()) {
      refuse(origin, fmt::format("a direction of test \"{}\", which its tests do not name", to_string(test)));
    }
    return matrices[static_cast<std::size_t>(found - tests.begin())];
  };
  for (const auto& pair : read.pairs()) {
    check_direction(origin, pair.source, pair.destination, ranks);
    auto& matrix = matrix_of(pair.test);
    const auto cell = matrix.index(pair.source, pair.destination);
    matrix.first[cell] = pair.first;
    matrix.last[cell] = pair.last;
    matrix.state[cell] = std::isnan(pair.last) ? CellState::failed : CellState::measured;
    matrix.retests[cell] = pair.retests;
  }
  read.pairs().clear();
  read.pairs().shrink_to_fit();
  for (const auto test : tests) matrix_of(test).failures = std::move(read.failed_pairs(test));
  return matrices;
}

// Each test's section of the matrix form, but for the rows and failures streamed from it: a
// test the report runs, and its unit and lists of the types the description gives.
void check_matrix_sections(const json& kept, const std::vector<Test>& tests, const std::string& origin) {
  for (const auto& [name, section] : kept.items()) {
    if (!test_named(name) || std::ranges::find(tests, *test_named(name)) == tests.end()) {
      refuse(origin, fmt::format("its matrices have a test \"{}\", which its tests do not name", name));
    }
    try {
      (void)matrix_from_json(section, "matrices." + name);
    } catch (const ProtocolError& error) {
      refuse(origin, error.what());
    }
  }
}

std::vector<TestMatrix> from_matrices(Directions& read, const json& kept, const std::vector<Test>& tests, int ranks,
                                      const std::string& origin) {
  check_matrix_sections(kept, tests, origin);
  std::vector<TestMatrix> matrices;
  for (const auto test : tests) {
    const auto name = std::string(to_string(test));
    const auto found = read.matrices().find(name);
    if (!kept.contains(name)) refuse(origin, fmt::format("its matrices lack the test \"{}\"", name));
    auto streamed = found == read.matrices().end() ? StreamedMatrix{} : std::move(found->second);
    // Checked before the table is made: its ranks x ranks cells are then what the file holds.
    const auto side = static_cast<std::size_t>(ranks);
    if (streamed.first_rows != side || streamed.last_rows != side ||
        (side > 0 && (streamed.widest_row != side || streamed.narrowest_row != side))) {
      refuse(origin, fmt::format("the \"{}\" matrices hold {} and {} cells, not {} x {}", name, streamed.first.size(),
                                 streamed.last.size(), ranks, ranks));
    }
    TestMatrix matrix(name, better_of(test), ranks);
    matrix.first = std::move(streamed.first);
    matrix.last = std::move(streamed.last);
    for (std::size_t cell = 0; cell < matrix.cell_count(); ++cell) {
      if (matrix.has_figure(cell)) matrix.state[cell] = CellState::measured;
      if (!std::isnan(matrix.first[cell]) && matrix.first[cell] != matrix.last[cell]) matrix.retests[cell] = 1;
    }
    for (auto& failure : streamed.failures) {
      check_direction(origin, failure.source, failure.destination, ranks);
      matrix.state[matrix.index(failure.source, failure.destination)] = CellState::failed;
      matrix.failures.push_back(std::move(failure));
    }
    matrices.push_back(std::move(matrix));
  }
  return matrices;
}

MeshHead head_of(const json& kept, const std::string& origin) {
  const auto tool =
      kept.is_object() && kept.value("tool", json()).is_string() ? kept["tool"].get<std::string>() : std::string();
  if (tool != "rdma_mesh") {
    refuse(origin, tool.empty() ? "not an rdma_mesh report (it has no \"tool\")"
                                : fmt::format("not an rdma_mesh report (its tool is {})", tool));
  }
  // A report of a run that never started (a usage error) has none: say so in a person's words.
  if (!kept.contains("ranks")) refuse(origin, "it has no ranks count");
  MeshHead head;
  try {
    head = head_from_json(kept, "");
  } catch (const ProtocolError& error) {
    refuse(origin, error.what());
  }
  if (head.ranks < 0 || head.ranks > most_ranks) {
    refuse(origin, fmt::format("{} ranks is not a mesh this tool reads", head.ranks));
  }
  // Each test once: a matrix of ranks x ranks cells each.
  for (auto test = head.tests.begin(); test != head.tests.end(); ++test) {
    if (std::find(head.tests.begin(), test, *test) != test) {
      refuse(origin, fmt::format("its tests name \"{}\" twice", to_string(*test)));
    }
  }
  return head;
}

}  // namespace

SavedMesh read_mesh_report(std::istream& in, const std::string& origin) {
  Directions read;
  json kept;
  try {
    // The summary is the analysis's, which --analyse makes again.
    const JsonStreamPlan plan{
        .streamed = {"pairs/*", "matrices/*/first/*", "matrices/*/final/*", "matrices/*/failures/*"},
        .skipped = {"summary"}};
    kept = read_json_stream(in, plan,
                            [&read](const std::vector<std::string>& path, json& value) { read.take(path, value); });
  } catch (const ProtocolError& error) {
    refuse(origin, error.what());
  }
  const auto head = head_of(kept, origin);
  const bool had_pairs = kept.contains("pairs") && kept["pairs"].is_array();
  const bool had_matrices = kept.contains("matrices") && kept["matrices"].is_object();
  if (!had_pairs && !had_matrices) refuse(origin, "it has neither pairs nor matrices");
  if (!had_matrices && head.ranks > pairs_form_most_ranks) {
    // Not rdma_mesh's (it writes matrices above pairs_form_most_ranks ranks) but a long-form
    // file of many ranks (tests/synth writes them) is read if it holds a fair part of the
    // directions it claims: the cells are then within a few times what the file holds.
    const auto directions =
        head.tests.size() * static_cast<std::size_t>(head.ranks) * static_cast<std::size_t>(head.ranks - 1);
    if (read.pairs().size() * 8 < directions) {
      refuse(origin,
             fmt::format("{} ranks in the per-direction form with {} of its {} directions: rdma_mesh writes that "
                         "form up to {} ranks, and a file above that must hold an eighth of them",
                         head.ranks, read.pairs().size(), directions, pairs_form_most_ranks));
    }
  }

  SavedMesh saved;
  saved.form = had_matrices ? "matrix" : "pairs";
  saved.table.ranks = head.ranks;
  saved.table.tests = had_matrices ? from_matrices(read, kept["matrices"], head.tests, head.ranks, origin)
                                   : from_pairs(read, head.tests, head.ranks, origin);
  try {
    if (kept.contains("nodes")) saved.table.nodes = nodes_from_json(kept["nodes"], "nodes");
  } catch (const ProtocolError& error) {
    refuse(origin, fmt::format("its nodes do not read: {}", error.what()));
  }
  saved.rounds = head.rounds;
  saved.rounds_completed = head.rounds_completed;
  saved.finished = head.finished;
  if (kept.contains("arguments") && kept["arguments"].is_object()) saved.arguments = kept["arguments"];
  return saved;
}

}  // namespace rdmakit::mesh
