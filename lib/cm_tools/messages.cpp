#include "lib/cm_tools/messages.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include <fmt/format.h>

#include "lib/base/big_endian.hpp"
#include "lib/base/error.hpp"

namespace rdmakit::rping {

namespace {

constexpr char first_pattern_char = 'A';  // 65
constexpr char last_pattern_char = 'z';   // 122
constexpr int pattern_span = last_pattern_char - first_pattern_char + 1;

}  // namespace

AdvertBytes encode(const BufferAdvert& advert) {
  AdvertBytes bytes{};
  store_big_endian(bytes.data(), advert.address);
  store_big_endian(bytes.data() + 8, advert.rkey);
  store_big_endian(bytes.data() + 12, advert.length);
  return bytes;
}

BufferAdvert decode_advert(std::span<const std::byte> bytes) {
  if (bytes.size() != advert_wire_size) {
    throw ProtocolError(fmt::format("peer sent a {}-byte message where a {}-byte buffer advert belongs", bytes.size(),
                                    advert_wire_size));
  }
  return BufferAdvert{
      .address = load_big_endian<std::uint64_t>(bytes.data()),
      .rkey = load_big_endian<std::uint32_t>(bytes.data() + 8),
      .length = load_big_endian<std::uint32_t>(bytes.data() + 12),
  };
}

void check_advert_fits(const BufferAdvert& advert, std::size_t capacity, const std::string& purpose) {
  if (advert.length == 0) {
    throw ProtocolError(fmt::format("peer advertised an empty buffer for {}", purpose));
  }
  if (advert.length > capacity) {
    throw ProtocolError(fmt::format("peer advertised {} bytes for {} but our buffer holds {}; use -S {} or more here",
                                    advert.length, purpose, capacity, advert.length));
  }
}

void fill_ping_payload(std::span<char> buffer, std::uint64_t iteration) {
  if (buffer.size() < min_payload_size) {
    throw std::invalid_argument("ping payload smaller than the minimum size");
  }
  // The stock tool formats the iteration as a C int.
  const auto tag = fmt::format("rdma-ping-{}: ", static_cast<int>(iteration));
  std::memcpy(buffer.data(), tag.data(), tag.size());
  auto c = static_cast<int>(first_pattern_char + static_cast<int>(iteration % pattern_span));
  for (std::size_t i = tag.size(); i < buffer.size(); ++i) {
    buffer[i] = static_cast<char>(c);
    c = c == last_pattern_char ? first_pattern_char : c + 1;
  }
  buffer.back() = '\0';
}

std::size_t echo_length(std::span<const char> received) {
  const auto text = strnlen(received.data(), received.size());
  return text < received.size() ? text + 1 : received.size();
}

}  // namespace rdmakit::rping

namespace rdmakit::echo {

void encode_remaining(std::span<std::uint8_t, message_size> message, std::uint32_t remaining) {
  std::fill(message.begin(), message.end(), std::uint8_t{0});
  store_big_endian(message.data(), remaining);
}

std::uint32_t decode_remaining(std::span<const std::uint8_t, message_size> message) {
  return load_big_endian<std::uint32_t>(message.data());
}

void check_message_length(std::uint32_t received) {
  if (received != message_size) {
    throw ProtocolError(fmt::format("peer sent a {}-byte message; rdma_server/rdma_client messages are {} bytes",
                                    received, message_size));
  }
}

}  // namespace rdmakit::echo
