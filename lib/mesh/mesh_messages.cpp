#include "lib/mesh/mesh_messages.hpp"

#include <limits>
#include <string>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/base/untrusted_json.hpp"

namespace rdmakit::mesh {

namespace {

// A Node is flat but for its verdict; an observation carries a rank's figures and error
// record, a few levels each.
constexpr std::size_t max_message_depth = 16;

nlohmann::json parse_message(std::string_view text, int rank, const char* what) {
  auto message = parse_untrusted_json(text, max_message_depth, fmt::format("rank {}'s {}", rank, what));
  if (!message.is_object()) throw ProtocolError(fmt::format("rank {}'s {} is not a JSON object", rank, what));
  return message;
}

// An integer member within [low, high]: nlohmann's get<int>() of a float out of range is undefined.
int integer_member(const nlohmann::json& object, const char* key, int low, int high, int rank) {
  const auto found = object.find(key);
  if (found == object.end() || !found->is_number_integer()) {
    throw ProtocolError(fmt::format("rank {}'s message: '{}' is missing or not an integer", rank, key));
  }
  const auto value = found->get<long long>();
  if (value < low || value > high) {
    throw ProtocolError(fmt::format("rank {}'s message: '{}' is {}, outside {}..{}", rank, key, value, low, high));
  }
  return static_cast<int>(value);
}

Outcome outcome_of_message(std::string_view name, int rank) {
  if (const auto outcome = outcome_named(name)) return *outcome;
  throw ProtocolError(fmt::format("rank {}'s message: unknown outcome '{}'", rank, name));
}

Attempt attempt_from(const nlohmann::json& item, int rank) {
  if (!item.is_object() || !item.contains("outcome") || !item["outcome"].is_string() || !item.contains("figure") ||
      !(item["figure"].is_null() || item["figure"].is_number()) || !item.contains("figures") ||
      !item["figures"].is_object() || !item.contains("error")) {
    throw ProtocolError(fmt::format("rank {}'s message: 'attempt' is not {{outcome, figure, figures, error}}", rank));
  }
  Attempt attempt;
  attempt.outcome = outcome_of_message(item["outcome"].get<std::string>(), rank);
  if (!item["figure"].is_null()) attempt.figure = item["figure"].get<double>();
  attempt.figures = item["figures"];
  attempt.error = item["error"];
  return attempt;
}

}  // namespace

nlohmann::json to_json(const Observation& observation) {
  return {{"source", observation.source},
          {"destination", observation.destination},
          {"test", to_string(observation.test)},
          {"sender", observation.sender},
          {"attempt", to_json(observation.attempt)}};
}

Node node_from_message(std::string_view text, int rank) {
  const auto message = parse_message(text, rank, "description");
  // The integers' own ranges first; the description refuses the rest's wrong types.
  for (const char* key : {"rank", "port", "gid_index", "mtu"}) {
    if (message.contains(key)) integer_member(message, key, -1, std::numeric_limits<int>::max(), rank);
  }
  try {
    return node_from_json(message, "");
  } catch (const ProtocolError& wrong) {
    throw ProtocolError(fmt::format("rank {}'s description: {}", rank, wrong.what()));
  }
}

Observation observation_from_message(std::string_view text, int rank, int ranks) {
  const auto message = parse_message(text, rank, "observation");
  Observation observation;
  observation.source = integer_member(message, "source", 0, ranks - 1, rank);
  observation.destination = integer_member(message, "destination", 0, ranks - 1, rank);
  const auto test = message.find("test");
  const auto named = test != message.end() && test->is_string() ? test_named(test->get<std::string>()) : std::nullopt;
  if (!named) throw ProtocolError(fmt::format("rank {}'s observation: no test rdma_mesh runs", rank));
  observation.test = *named;
  const auto sender = message.find("sender");
  if (sender == message.end() || !sender->is_boolean()) {
    throw ProtocolError(fmt::format("rank {}'s observation: 'sender' is not true or false", rank));
  }
  observation.sender = sender->get<bool>();
  if (!message.contains("attempt")) throw ProtocolError(fmt::format("rank {}'s observation: no 'attempt'", rank));
  observation.attempt = attempt_from(message["attempt"], rank);
  return observation;
}

}  // namespace rdmakit::mesh
