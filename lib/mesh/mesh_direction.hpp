#pragma once
// What rdma_mesh measures, pure of RDMA so that the report's reader and its codec
// (lib/mesh/mesh_json) build without a device: the tests, one attempt at a direction, a
// direction with its retests, and what a rank observed of one.

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/report.hpp"

namespace rdmakit::mesh {

enum class Test { bandwidth, latency, connect };
// The tests' names, in the enum's order: the one table the options, the report and its
// reader take them from.
inline constexpr std::array<std::string_view, 3> test_names{"bw", "lat", "cm"};
std::string_view to_string(Test test);  // "bw", "lat", "cm"
// The test so named; none for another name.
std::optional<Test> test_named(std::string_view name);
// The unit of the test's figures: "MiB/s", "us", "ms".
std::string_view unit_of(Test test);

// One attempt at one direction of one pair.
struct Attempt {
  Outcome outcome = Outcome::completed;
  std::optional<double> figure;
  nlohmann::json figures = nlohmann::json::object();  // the measurement behind the figure
  std::optional<nlohmann::json> error;                // the error record (the sender's, else the receiver's)
};

// One direction of one pair in one test: the first attempt and the retests.
struct Direction {
  int source = 0;  // runs the client: sends (send, write) or reads (read), pings, connects
  int destination = 0;
  Test test = Test::bandwidth;
  int round = 0;
  std::string cause;  // the verdict's code when a rank could not take part
  Attempt first;
  std::vector<Attempt> retests;

  const Attempt& last() const { return retests.empty() ? first : retests.back(); }
};

// One observation of a direction, from the side that made it.
struct Observation {
  int source = 0;
  int destination = 0;
  Test test = Test::bandwidth;
  bool sender = false;
  Attempt attempt;
};

}  // namespace rdmakit::mesh
