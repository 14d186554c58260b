// rdma_server reads the exchanges still to come from each 16-byte message of the client
// (shorter ones are refused before, by check_message_length). The input is the received
// message, padded with zeros.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "fuzz_support.hpp"
#include "lib/cm_tools/messages.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rdmakit;
  std::array<std::uint8_t, echo::message_size> message{};
  std::copy_n(data, std::min(size, message.size()), message.begin());
  const auto remaining = echo::decode_remaining(message);
  // Big-endian in the first four bytes, whatever the other twelve hold (stock tools send zeros).
  const auto expected = static_cast<std::uint32_t>(message[0]) << 24 | static_cast<std::uint32_t>(message[1]) << 16 |
                        static_cast<std::uint32_t>(message[2]) << 8 | message[3];
  FUZZ_CHECK(remaining == expected);

  std::array<std::uint8_t, echo::message_size> again{};
  again.fill(0xa5);  // encode must clear what a previous exchange left
  echo::encode_remaining(again, remaining);
  FUZZ_CHECK(std::equal(again.begin(), again.begin() + 4, message.begin()));
  FUZZ_CHECK(std::all_of(again.begin() + 4, again.end(), [](std::uint8_t b) { return b == 0; }));
  FUZZ_CHECK(echo::decode_remaining(again) == remaining);
  return 0;
}
