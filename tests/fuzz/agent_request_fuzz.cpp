// diag-connect's agent reads a client's request from its side channel (decode_request)
// and its probe's CM hello (decode_hello); the client reads the agent's offer from the accept's
// private data (decode_offer). The input is the request; the same bytes are tried as
// a hello and as an offer.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "fuzz_support.hpp"
#include "lib/base/error.hpp"
#include "lib/diag/agent_protocol.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rdmakit;
  const std::span<const std::uint8_t> bytes(data, size);
  // A request: within its bounds, and what it encodes to reads back the same.
  if (const auto request = fuzz::decoded([&] { return agent::decode_request(fuzz::as_text(data, size)); })) {
    FUZZ_CHECK(size <= agent::max_request_bytes);
    FUZZ_CHECK(request->address.size() <= 64 && request->source.size() <= 64);
    FUZZ_CHECK(request->port_space == "tcp" || request->port_space == "udp" || request->port_space == "ib");
    const auto again = agent::encode_request(*request);
    FUZZ_CHECK(agent::decode_request(again) == *request);
  }
  // A hello is its magic and version, whatever the CM pads after it; with a ticket, the
  // ticket's bytes are there, and it encodes to a prefix of the input.
  if (const auto hello = agent::decode_hello(bytes)) {
    FUZZ_CHECK(size >= (hello->ticket ? agent::ticketed_hello_bytes : agent::hello_bytes));
    const auto again = agent::encode_hello(*hello);
    FUZZ_CHECK(agent::decode_hello(again) == *hello);
    if (hello->ticket) FUZZ_CHECK(std::equal(again.begin() + 6, again.end(), bytes.begin() + 6));
  }
  // An offer: nullopt for another listener's data, ProtocolError for an unusable one of ours,
  // else one the data check can use as it is.
  const auto offer = fuzz::decoded([&] { return agent::decode_offer(bytes); });
  if (offer && *offer) {
    const auto& usable = **offer;
    FUZZ_CHECK(size >= agent::offer_bytes);
    FUZZ_CHECK(usable.length == agent::check_buffer_bytes && usable.rkey != 0);
    FUZZ_CHECK(usable.receives >= 1 && usable.receives <= 64);
    const auto again = agent::encode_offer(usable);
    FUZZ_CHECK(agent::decode_offer(again) == offer->value());
  }
  return 0;
}
