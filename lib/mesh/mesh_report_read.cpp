#include "lib/mesh/mesh_report_read.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "lib/base/error.hpp"

namespace rdmakit::mesh {

namespace {

using json = nlohmann::json;

// A ranks count this large is a damaged file, not a cluster: its matrices would not fit.
constexpr int most_ranks = 16384;

// A rank as a saved report gives it: a JSON number that must be a whole one within the
// ranks a mesh can have; -1 (which no direction fits) for anything else (1e300, 2.5, NaN),
// rather than a cast whose result the language leaves undefined.
int rank_number(double number) {
  if (!(number >= 0 && number < most_ranks) || number != std::floor(number)) return -1;
  return static_cast<int>(number);
}

// Builds a small document from SAX events: the report's top-level keys other than the
// directions (nodes, arguments, tests, ...), which are small at any mesh size.
class Capture {
 public:
  explicit Capture(json& root) : stack_{&root} {}
  bool done() const { return stack_.empty(); }
  void value(json v) {
    auto& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
    } else if (top.is_object()) {
      top[key_] = std::move(v);
    } else {
      top = std::move(v);
      stack_.pop_back();
    }
  }
  void open(json empty) {
    auto& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(empty));
      stack_.push_back(&top.back());
    } else if (top.is_object()) {
      stack_.push_back(&(top[key_] = std::move(empty)));
    } else {
      top = std::move(empty);
    }
  }
  void close() { stack_.pop_back(); }
  void key(std::string name) { key_ = std::move(name); }

 private:
  std::vector<json*> stack_;
  std::string key_;
};

// One direction of the per-direction form, as far as the analysis needs it.
struct PairRecord {
  int source = -1;
  int destination = -1;
  std::string test;
  std::optional<double> first;
  std::optional<double> last;
  bool last_given = false;
  int retests = 0;
  std::string cause;
  std::string message;
};

struct StoredPair {
  int source;
  int destination;
  std::uint8_t test;
  std::uint8_t retests;
  bool failed;
  double first;
  double last;
};

// The SAX handler. `depth` counts the containers open; the root object is depth 1, a
// top-level key's array or object depth 2, a direction (pairs[i]) depth 3.
class ReportReader {
 public:
  bool null() { return scalar(json()); }
  bool boolean(bool v) { return scalar(json(v)); }
  bool number_integer(json::number_integer_t v) { return scalar(json(v), static_cast<double>(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return scalar(json(v), static_cast<double>(v)); }
  bool number_float(json::number_float_t v, const std::string& /*text*/) { return scalar(json(v), v); }
  bool string(std::string& v) { return scalar(json(v), std::nullopt, &v); }
  static bool binary(json::binary_t& /*v*/) { return true; }
  bool start_object(std::size_t /*elements*/) { return open(json::object()); }
  bool start_array(std::size_t /*elements*/) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(std::string& name) {
    if (depth_ == 1) {
      top_key_ = name;
      section_ = name == "pairs"      ? Section::pairs
                 : name == "matrices" ? Section::matrices
                 : name == "summary"  ? Section::skip
                                      : Section::capture;
      if (section_ == Section::capture) capture_.emplace(top_[name]);
      return true;
    }
    if (section_ == Section::capture && capture_) capture_->key(name);
    keys_[static_cast<std::size_t>(std::min(depth_, max_depth))] = name;
    return true;
  }
  bool parse_error(std::size_t position, const std::string& /*token*/, const nlohmann::detail::exception& error) {
    error_ = fmt::format("not a complete JSON document at byte {}: {}", position, error.what());
    return false;
  }

  const std::string& error() const { return error_; }
  json& top() { return top_; }
  std::vector<PairRecord>& failures() { return failed_pairs_; }
  std::vector<StoredPair>& pairs() { return pairs_; }
  std::vector<std::string>& pair_tests() { return pair_tests_; }
  bool had_pairs() const { return had_pairs_; }
  bool had_matrices() const { return had_matrices_; }
  std::vector<TestMatrix>& matrices() { return matrices_; }
  std::vector<std::pair<std::string, std::vector<Failure>>>& matrix_failures() { return matrix_failures_; }

 private:
  enum class Section { none, capture, pairs, matrices, skip };
  static constexpr int max_depth = 8;

  const std::string& key_at(int depth) const { return keys_[static_cast<std::size_t>(std::min(depth, max_depth))]; }

  bool open(json empty) {
    ++depth_;
    if (depth_ == 2 && section_ == Section::pairs) had_pairs_ = true;
    if (depth_ == 2 && section_ == Section::matrices) had_matrices_ = true;
    if (section_ == Section::capture && depth_ >= 2) capture_->open(std::move(empty));
    if (section_ == Section::pairs) open_in_pairs();
    if (section_ == Section::matrices) open_in_matrices();
    return true;
  }

  bool close() {
    if (section_ == Section::capture && depth_ >= 2) capture_->close();
    if (section_ == Section::pairs && depth_ == 3) store_pair();
    if (section_ == Section::matrices && depth_ == 5 && key_at(3) == "failures") store_matrix_failure();
    --depth_;
    if (depth_ == 1) section_ = Section::none;
    return true;
  }

  bool scalar(json v, std::optional<double> number = std::nullopt, const std::string* text = nullptr) {
    if (depth_ == 1 && section_ == Section::capture) {
      top_[top_key_] = std::move(v);
      section_ = Section::none;
      return true;
    }
    if (section_ == Section::capture) capture_->value(std::move(v));
    if (section_ == Section::pairs) pair_scalar(number, text);
    if (section_ == Section::matrices) matrix_scalar(number, text);
    return true;
  }

  void open_in_pairs() {
    if (depth_ == 3) pair_ = PairRecord{};
    if (depth_ == 5 && key_at(3) == "retests") ++pair_.retests;
  }

  void pair_scalar(std::optional<double> number, const std::string* text) {
    if (depth_ == 4 && key_at(3) == "error" && key_at(4) == "message" && text != nullptr) pair_.message = *text;
    if (depth_ != 3) return;
    const auto& name = key_at(3);
    if (name == "source" && number) pair_.source = rank_number(*number);
    if (name == "destination" && number) pair_.destination = rank_number(*number);
    if (name == "test" && text != nullptr) pair_.test = *text;
    if (name == "figure") pair_.first = number;
    if (name == "final_figure") {
      pair_.last = number;
      pair_.last_given = true;
    }
    if (name == "cause" && text != nullptr) pair_.cause = *text;
  }

  void store_pair() {
    auto found = std::find(pair_tests_.begin(), pair_tests_.end(), pair_.test);
    if (found == pair_tests_.end()) found = pair_tests_.insert(pair_tests_.end(), pair_.test);
    const auto last = pair_.last_given ? pair_.last : pair_.first;
    pairs_.push_back(StoredPair{.source = pair_.source,
                                .destination = pair_.destination,
                                .test = static_cast<std::uint8_t>(found - pair_tests_.begin()),
                                .retests = static_cast<std::uint8_t>(std::min(pair_.retests, 255)),
                                .failed = !last,
                                .first = pair_.first.value_or(no_figure),
                                .last = last.value_or(no_figure)});
    if (!last) failed_pairs_.push_back(std::move(pair_));
  }

  void open_in_matrices() {
    if (depth_ == 3) {
      matrices_.emplace_back();
      matrices_.back().test = key_at(2);
      matrix_failures_.emplace_back(key_at(2), std::vector<Failure>{});
    }
    if (depth_ == 5) failure_ = Failure{};
  }

  void matrix_scalar(std::optional<double> number, const std::string* text) {
    if (matrices_.empty()) return;
    auto& matrix = matrices_.back();
    if (depth_ == 5 && (key_at(3) == "first" || key_at(3) == "final")) {
      auto& cells = key_at(3) == "first" ? matrix.first : matrix.last;
      cells.push_back(number.value_or(no_figure));
    }
    if (depth_ == 5 && key_at(3) == "failures") {
      const auto& name = key_at(5);
      if (name == "source" && number) failure_.source = rank_number(*number);
      if (name == "destination" && number) failure_.destination = rank_number(*number);
      if (name == "cause" && text != nullptr) failure_.cause = *text;
      if (name == "message" && text != nullptr) failure_.message = *text;
    }
  }

  void store_matrix_failure() { matrix_failures_.back().second.push_back(std::move(failure_)); }

  int depth_ = 0;
  Section section_ = Section::none;
  std::string top_key_;
  std::array<std::string, max_depth + 1> keys_;
  json top_ = json::object();
  std::optional<Capture> capture_;
  bool had_pairs_ = false;
  bool had_matrices_ = false;
  PairRecord pair_;
  std::vector<StoredPair> pairs_;
  std::vector<std::string> pair_tests_;
  std::vector<PairRecord> failed_pairs_;
  std::vector<TestMatrix> matrices_;
  std::vector<std::pair<std::string, std::vector<Failure>>> matrix_failures_;
  Failure failure_;
  std::string error_;
};

// The report's bytes a chunk at a time, as the input iterator nlohmann's parser takes: its
// adapter for an istream costs a virtual call a byte, a third of the time of a 400 MB read.
class Chunks {
 public:
  explicit Chunks(std::istream& in) : in_(in), buffer_(std::size_t{1} << 20) { fill(); }
  bool empty() const { return position_ == length_; }
  const char& current() const { return buffer_[position_]; }
  // False at the end of the input.
  bool advance() {
    if (++position_ < length_) return true;
    fill();
    return !empty();
  }

 private:
  void fill() {
    in_.read(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    length_ = static_cast<std::size_t>(in_.gcount());
    position_ = 0;
  }
  std::istream& in_;
  std::vector<char> buffer_;
  std::size_t position_ = 0;
  std::size_t length_ = 0;
};

class ChunkIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  ChunkIterator() = default;  // the end
  explicit ChunkIterator(Chunks& chunks) : chunks_(chunks.empty() ? nullptr : &chunks) {}
  reference operator*() const { return chunks_->current(); }
  ChunkIterator& operator++() {
    if (!chunks_->advance()) chunks_ = nullptr;
    return *this;
  }
  ChunkIterator operator++(int) {
    auto before = *this;
    ++*this;
    return before;
  }
  friend bool operator==(const ChunkIterator& a, const ChunkIterator& b) { return a.chunks_ == b.chunks_; }

 private:
  Chunks* chunks_ = nullptr;
};

Better better_of(const std::string& test) {
  return test == "bw" ? Better::higher : Better::lower;
}

[[noreturn]] void refuse(const std::string& origin, const std::string& why) {
  throw UsageError(fmt::format("--analyse {}: {}", origin, why));
}

void check_direction(const std::string& origin, int source, int destination, int ranks) {
  if (source < 0 || source >= ranks || destination < 0 || destination >= ranks || source == destination) {
    refuse(origin, fmt::format("a direction {}->{} does not fit its {} ranks", source, destination, ranks));
  }
}

std::vector<TestMatrix> from_pairs(ReportReader& reader, const std::vector<std::string>& tests, int ranks,
                                   const std::string& origin) {
  std::vector<TestMatrix> matrices;
  matrices.reserve(tests.size());
  for (const auto& test : tests) matrices.emplace_back(test, better_of(test), ranks);
  std::vector<int> matrix_of;
  for (const auto& test : reader.pair_tests()) {
    const auto found = std::find(tests.begin(), tests.end(), test);
    if (found == tests.end())
      refuse(origin, fmt::format("a direction of test \"{}\", which its tests do not name", test));
    matrix_of.push_back(static_cast<int>(found - tests.begin()));
  }
  for (const auto& pair : reader.pairs()) {
    check_direction(origin, pair.source, pair.destination, ranks);
    auto& matrix = matrices[static_cast<std::size_t>(matrix_of[pair.test])];
    const auto cell = matrix.index(pair.source, pair.destination);
    matrix.first[cell] = pair.first;
    matrix.last[cell] = pair.last;
    matrix.state[cell] = pair.failed ? CellState::failed : CellState::measured;
    matrix.retests[cell] = pair.retests;
  }
  reader.pairs().clear();
  reader.pairs().shrink_to_fit();
  for (auto& failed : reader.failures()) {
    const auto index = std::find(tests.begin(), tests.end(), failed.test) - tests.begin();
    matrices[static_cast<std::size_t>(index)].failures.push_back(Failure{.source = failed.source,
                                                                         .destination = failed.destination,
                                                                         .cause = std::move(failed.cause),
                                                                         .message = std::move(failed.message)});
  }
  return matrices;
}

std::vector<TestMatrix> from_matrices(ReportReader& reader, const std::vector<std::string>& tests, int ranks,
                                      const std::string& origin) {
  std::vector<TestMatrix> matrices;
  for (const auto& test : tests) {
    const auto found = std::find_if(reader.matrices().begin(), reader.matrices().end(),
                                    [&](const TestMatrix& m) { return m.test == test; });
    if (found == reader.matrices().end()) refuse(origin, fmt::format("its matrices lack the test \"{}\"", test));
    // Checked before the table is made: its ranks x ranks cells are then what the file holds.
    const auto cells = static_cast<std::size_t>(ranks) * static_cast<std::size_t>(ranks);
    if (found->first.size() != cells || found->last.size() != cells) {
      refuse(origin, fmt::format("the \"{}\" matrices hold {} and {} cells, not {} x {}", test, found->first.size(),
                                 found->last.size(), ranks, ranks));
    }
    TestMatrix matrix(test, better_of(test), ranks);
    matrix.first = std::move(found->first);
    matrix.last = std::move(found->last);
    const auto& failures = reader.matrix_failures()[static_cast<std::size_t>(found - reader.matrices().begin())].second;
    for (std::size_t cell = 0; cell < matrix.cell_count(); ++cell) {
      if (matrix.has_figure(cell)) matrix.state[cell] = CellState::measured;
      if (!std::isnan(matrix.first[cell]) && matrix.first[cell] != matrix.last[cell]) matrix.retests[cell] = 1;
    }
    for (const auto& failure : failures) {
      check_direction(origin, failure.source, failure.destination, ranks);
      matrix.state[matrix.index(failure.source, failure.destination)] = CellState::failed;
      matrix.failures.push_back(failure);
    }
    matrices.push_back(std::move(matrix));
  }
  return matrices;
}

std::vector<std::string> tests_of(const json& top, const std::string& origin) {
  std::vector<std::string> tests;
  if (!top.contains("tests") || !top["tests"].is_array()) refuse(origin, "it has no tests list");
  for (const auto& test : top["tests"]) {
    if (!test.is_string() || (test != "bw" && test != "lat" && test != "cm")) {
      refuse(origin, fmt::format("its tests name {}, not bw, lat or cm", test.dump()));
    }
    // Each test once: a matrix of ranks x ranks cells each, which a list naming one test a
    // thousand times would have multiplied.
    if (std::find(tests.begin(), tests.end(), test.get<std::string>()) != tests.end()) {
      refuse(origin, fmt::format("its tests name {} twice", test.dump()));
    }
    tests.push_back(test.get<std::string>());
  }
  return tests;
}

}  // namespace

SavedMesh read_mesh_report(std::istream& in, const std::string& origin) {
  ReportReader reader;
  Chunks chunks(in);
  if (!json::sax_parse(ChunkIterator(chunks), ChunkIterator(), &reader)) refuse(origin, reader.error());
  auto& top = reader.top();
  const auto tool = top.value("tool", json()).is_string() ? top["tool"].get<std::string>() : std::string();
  if (tool != "rdma_mesh") {
    refuse(origin, tool.empty() ? "not an rdma_mesh report (it has no \"tool\")"
                                : fmt::format("not an rdma_mesh report (its tool is {})", tool));
  }
  if (!top.contains("ranks") || !top["ranks"].is_number_integer()) refuse(origin, "it has no ranks count");
  const auto ranks = top["ranks"].get<int>();
  if (ranks < 0 || ranks > most_ranks) refuse(origin, fmt::format("{} ranks is not a mesh this tool reads", ranks));
  const auto tests = tests_of(top, origin);
  if (!reader.had_pairs() && !reader.had_matrices()) refuse(origin, "it has neither pairs nor matrices");
  if (!reader.had_matrices() && ranks > pairs_form_most_ranks) {
    // Not rdma_mesh's (it writes matrices above pairs_form_most_ranks ranks) but a long-form
    // file of many ranks (tests/synth writes them) is read if it holds a fair part of the
    // directions it claims: the cells are then within a few times what the file holds.
    const auto directions = tests.size() * static_cast<std::size_t>(ranks) * static_cast<std::size_t>(ranks - 1);
    if (reader.pairs().size() * 8 < directions) {
      refuse(origin,
             fmt::format("{} ranks in the per-direction form with {} of its {} directions: rdma_mesh writes that "
                         "form up to {} ranks, and a file above that must hold an eighth of them",
                         ranks, reader.pairs().size(), directions, pairs_form_most_ranks));
    }
  }

  SavedMesh saved;
  saved.form = reader.had_matrices() ? "matrix" : "pairs";
  saved.table.ranks = ranks;
  saved.table.tests =
      reader.had_matrices() ? from_matrices(reader, tests, ranks, origin) : from_pairs(reader, tests, ranks, origin);
  try {
    if (top.contains("nodes")) saved.table.nodes = nodes_from_json(top["nodes"], "nodes");
  } catch (const ProtocolError& error) {
    refuse(origin, fmt::format("its nodes do not read: {}", error.what()));
  }
  saved.rounds = top.value("rounds", 0);
  saved.rounds_completed = top.value("rounds_completed", 0);
  saved.finished = top.value("finished", false);
  if (top.contains("arguments") && top["arguments"].is_object()) saved.arguments = top["arguments"];
  return saved;
}

}  // namespace rdmakit::mesh
