#include "lib/mesh/mesh_messages.hpp"

#include <limits>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/base/untrusted_json.hpp"
#include "lib/mesh/mesh_json.hpp"

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

}  // namespace

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
  try {
    observation = observation_from_json(message, "");
  } catch (const ProtocolError& wrong) {
    throw ProtocolError(fmt::format("rank {}'s observation: {}", rank, wrong.what()));
  }
  for (const auto& [key, end] : {std::pair{"source", observation.source}, {"destination", observation.destination}}) {
    if (end < 0 || end >= ranks) {
      throw ProtocolError(fmt::format("rank {}'s observation: '{}' is {}, outside 0..{}", rank, key, end, ranks - 1));
    }
  }
  return observation;
}

}  // namespace rdmakit::mesh
