#pragma once
// What the CM tools' peers exchange, wire-compatible with rdma-core's, with encode/decode
// that never trust the peer.
//
// rping (wire-compatible with rdma-core's rping): each side advertises a buffer with a
// 16-byte SEND {be64 address, be32 rkey, be32 length}. Per iteration the client
// advertises its source buffer, the server RDMA-READs it and SENDs a go-ahead, the client
// advertises its sink buffer, the server RDMA-WRITEs the data back and SENDs a go-ahead.
// The go-ahead's content is ignored; only its 16-byte length matters.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rdmakit::rping {

inline constexpr std::size_t advert_wire_size = 16;
// sizeof("2147483647") + sizeof("rdma-ping-%d: "): room for the largest iteration tag.
inline constexpr std::uint32_t min_payload_size = 26;
inline constexpr std::uint32_t max_payload_size = 65535;
inline constexpr std::uint32_t default_payload_size = 64;
inline constexpr std::uint16_t default_port = 7174;

struct BufferAdvert {
  std::uint64_t address = 0;
  std::uint32_t rkey = 0;
  std::uint32_t length = 0;

  bool operator==(const BufferAdvert&) const = default;
};

using AdvertBytes = std::array<std::byte, advert_wire_size>;

AdvertBytes encode(const BufferAdvert& advert);

// Throws ProtocolError unless `bytes` is exactly one advert.
BufferAdvert decode_advert(std::span<const std::byte> bytes);

// Throws ProtocolError when the peer asks us to move nothing or more than `capacity`
// bytes (our registered buffer); `purpose` names the step for the message.
void check_advert_fits(const BufferAdvert& advert, std::size_t capacity, const std::string& purpose);

// Fills `buffer` exactly like the stock client: "rdma-ping-N: " followed by a rotating
// 'A'..'z' pattern that starts one letter later each iteration, NUL in the last byte.
void fill_ping_payload(std::span<char> buffer, std::uint64_t iteration);

// Bytes the server echoes back: the string it read including its NUL, never more than held.
std::size_t echo_length(std::span<const char> received);

}  // namespace rdmakit::rping

// rdma_server / rdma_client: one 16-byte message each way per exchange. The stock tools
// send zeros and ignore the content; ours put the number of exchanges still to come after
// this one in the first 4 bytes (big-endian), so zeros mean "last one" and a stock client
// gets exactly one exchange from our server.
namespace rdmakit::echo {

inline constexpr std::size_t message_size = 16;
inline constexpr std::uint16_t default_port = 7471;

void encode_remaining(std::span<std::uint8_t, message_size> message, std::uint32_t remaining);
std::uint32_t decode_remaining(std::span<const std::uint8_t, message_size> message);

// Throws ProtocolError unless a received message is exactly message_size bytes: a shorter
// one leaves the rest of the receive buffer, the count included, as the previous message
// left it. (A longer one never arrives: the receive fails with a local length error.)
void check_message_length(std::uint32_t received);

}  // namespace rdmakit::echo
