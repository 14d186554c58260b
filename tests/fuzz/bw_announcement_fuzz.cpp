// send_bw latency: the server takes each message size from the immediate data of the
// client's announcement and then polls (write) or answers with that many bytes of its
// buffer. Input: 4 bytes of immediate data as they sit in the completion, then the
// receive buffer's capacity (big-endian, 4 bytes; 8 KiB when absent). The whole input is
// also a received message, which on iWARP may be the size message that stands in for the
// immediate data.

#include <arpa/inet.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>

#include "fuzz_support.hpp"
#include "lib/base/error.hpp"
#include "lib/send_bw/bw_messages.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rdmakit;
  if (size < 4) return 0;
  std::uint32_t imm_data = 0;
  std::memcpy(&imm_data, data, sizeof imm_data);
  std::uint32_t capacity = 8192;
  if (size >= 8) {
    std::memcpy(&capacity, data + 4, sizeof capacity);
    capacity = ntohl(capacity);
  }
  const std::uint32_t announced = static_cast<std::uint32_t>(data[0]) << 24 |
                                  static_cast<std::uint32_t>(data[1]) << 16 | static_cast<std::uint32_t>(data[2]) << 8 |
                                  data[3];

  // The whole input as a received message: a size message only at its length with its marker.
  bool refused = false;
  std::optional<std::uint32_t> in_message;
  try {
    in_message = bw::decode_size_message({data, size}, capacity);
  } catch (const ProtocolError&) {
    refused = true;
  }
  const bool marked = size == bw::size_message_bytes && std::memcmp(data, "RKSZ", 4) == 0;
  FUZZ_CHECK(marked == (in_message.has_value() || refused));
  if (in_message) {
    FUZZ_CHECK(*in_message >= 1 && *in_message <= capacity);
    const auto again = bw::encode_size_message(*in_message);
    FUZZ_CHECK(std::memcmp(again.data(), data, again.size()) == 0);
  }

  const auto taken = fuzz::decoded([&] { return bw::decode_size_announcement(imm_data, capacity); });
  // Accepted means the polled last byte, at offset size - 1, lies inside the buffer.
  FUZZ_CHECK(taken.has_value() == (announced >= 1 && announced <= capacity));
  if (!taken) return 0;
  FUZZ_CHECK(*taken == announced);
  FUZZ_CHECK(*taken - 1 < capacity);
  // The server echoes the announcement back; the client compares it with what it sent.
  FUZZ_CHECK(bw::encode_size_announcement(*taken) == imm_data);
  FUZZ_CHECK(bw::decode_size_announcement(bw::encode_size_announcement(*taken), *taken) == *taken);
  return 0;
}
