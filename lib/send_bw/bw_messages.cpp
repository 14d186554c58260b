#include "lib/send_bw/bw_messages.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include <fmt/format.h>

#include "lib/base/big_endian.hpp"
#include "lib/base/error.hpp"

namespace rdmakit::bw {

namespace {

// Message kinds, so a Hello is never read as an Answer.
constexpr std::uint8_t hello_kind = 1;
constexpr std::uint8_t answer_kind = 2;
constexpr std::uint8_t datagram_counts_kind = 4;

template <std::size_t N>
std::array<std::uint8_t, N> header(std::uint8_t kind) {
  std::array<std::uint8_t, N> bytes{};
  store_big_endian(bytes.data(), magic);
  bytes[4] = version;
  bytes[5] = kind;
  return bytes;
}

void check_header(std::span<const std::uint8_t> bytes, std::size_t size, std::uint8_t kind, const char* what) {
  if (bytes.size() < size) {
    throw ProtocolError(std::string("send_bw ") + what + ": " + std::to_string(bytes.size()) +
                        " bytes of private data, expected at least " + std::to_string(size));
  }
  if (load_big_endian<std::uint32_t>(bytes.data()) != magic) {
    throw ProtocolError(std::string("send_bw ") + what + ": the peer is not send_bw (no RKBW magic)");
  }
  if (bytes[4] != version) {
    throw ProtocolError(std::string("send_bw ") + what + ": the peer speaks protocol version " +
                        std::to_string(bytes[4]) + ", this send_bw speaks " + std::to_string(version));
  }
  if (bytes[5] != kind) {
    throw ProtocolError(std::string("send_bw ") + what + ": unexpected message kind " + std::to_string(bytes[5]));
  }
}

void check_size(std::uint32_t size, const char* what) {
  if (size == 0 || size > max_message_size) {
    throw ProtocolError(std::string("send_bw: the peer's ") + what + " " + std::to_string(size) + " is outside 1.." +
                        std::to_string(max_message_size));
  }
}

constexpr std::uint8_t bidirectional_flag = 1;
constexpr std::uint8_t datagram_flag = 2;
constexpr std::uint8_t known_flags = bidirectional_flag | datagram_flag;

}  // namespace

std::string to_string(Operation operation) {
  switch (operation) {
    case Operation::send: return "send";
    case Operation::write: return "write";
    case Operation::read: return "read";
    case Operation::atomic: return "atomic";
  }
  return "unknown";
}

std::string to_string(Test test) {
  return test == Test::latency ? "lat" : "bw";
}

std::array<std::uint8_t, hello_size> encode(const Hello& hello) {
  auto bytes = header<hello_size>(hello_kind);
  bytes[6] = static_cast<std::uint8_t>(hello.operation);
  bytes[7] = static_cast<std::uint8_t>(hello.test);
  store_big_endian(bytes.data() + 8, hello.max_size);
  store_big_endian(bytes.data() + 12, hello.depth);
  bytes[16] =
      static_cast<std::uint8_t>((hello.bidirectional ? bidirectional_flag : 0) | (hello.datagram ? datagram_flag : 0));
  bytes[17] = hello.path_mtu;
  store_big_endian(bytes.data() + 18, hello.queue_pairs);
  store_big_endian(bytes.data() + 20, hello.queue_pair_index);
  store_big_endian(bytes.data() + 24, hello.reply_address);
  store_big_endian(bytes.data() + 32, hello.reply_rkey);
  store_big_endian(bytes.data() + 36, hello.reply_length);
  return bytes;
}

std::array<std::uint8_t, answer_size> encode(const Answer& answer) {
  auto bytes = header<answer_size>(answer_kind);
  store_big_endian(bytes.data() + 8, answer.address);
  store_big_endian(bytes.data() + 16, answer.rkey);
  store_big_endian(bytes.data() + 20, answer.length);
  return bytes;
}

Hello decode_hello(std::span<const std::uint8_t> bytes) {
  check_header(bytes, hello_size, hello_kind, "hello");
  if (bytes[6] > static_cast<std::uint8_t>(Operation::atomic)) {
    throw ProtocolError("send_bw hello: unknown operation " + std::to_string(bytes[6]));
  }
  if (bytes[7] > static_cast<std::uint8_t>(Test::latency)) {
    throw ProtocolError("send_bw hello: unknown test " + std::to_string(bytes[7]));
  }
  if ((bytes[16] & ~known_flags) != 0) {
    throw ProtocolError(fmt::format("send_bw hello: unknown flags {:#x}", bytes[16]));
  }
  Hello hello{.operation = static_cast<Operation>(bytes[6]),
              .test = static_cast<Test>(bytes[7]),
              .max_size = load_big_endian<std::uint32_t>(bytes.data() + 8),
              .depth = load_big_endian<std::uint32_t>(bytes.data() + 12),
              .bidirectional = (bytes[16] & bidirectional_flag) != 0,
              .datagram = (bytes[16] & datagram_flag) != 0,
              .path_mtu = bytes[17],
              .queue_pairs = load_big_endian<std::uint16_t>(bytes.data() + 18),
              .queue_pair_index = load_big_endian<std::uint16_t>(bytes.data() + 20),
              .reply_address = load_big_endian<std::uint64_t>(bytes.data() + 24),
              .reply_rkey = load_big_endian<std::uint32_t>(bytes.data() + 32),
              .reply_length = load_big_endian<std::uint32_t>(bytes.data() + 36)};
  check_size(hello.max_size, "message size");
  if (hello.depth == 0 || hello.depth > 1U << 16) {
    throw ProtocolError("send_bw hello: queue depth " + std::to_string(hello.depth) + " is outside 1..65536");
  }
  if (hello.queue_pairs == 0 || hello.queue_pairs > max_queue_pairs || hello.queue_pair_index >= hello.queue_pairs) {
    throw ProtocolError(fmt::format("send_bw hello: queue pair {} of {} is outside 1..{}", hello.queue_pair_index,
                                    hello.queue_pairs, max_queue_pairs));
  }
  if (hello.path_mtu > 5) {
    throw ProtocolError("send_bw hello: unknown path MTU code " + std::to_string(hello.path_mtu));
  }
  if (hello.test == Test::latency && hello.queue_pairs != 1) {
    throw ProtocolError("send_bw hello: a latency test runs on one queue pair");
  }
  if (hello.test == Test::latency && hello.operation == Operation::write && hello.reply_length < hello.max_size) {
    throw ProtocolError(fmt::format("send_bw hello: the client's reply buffer holds {} bytes, its messages {}",
                                    hello.reply_length, hello.max_size));
  }
  if (hello.operation == Operation::atomic && (hello.max_size != atomic_size || hello.bidirectional)) {
    throw ProtocolError(fmt::format("send_bw hello: atomics are {} bytes one way, not {} bytes{}", atomic_size,
                                    hello.max_size, hello.bidirectional ? " both ways" : ""));
  }
  if (hello.datagram && (hello.operation != Operation::send || hello.bidirectional)) {
    throw ProtocolError("send_bw hello: datagrams (UD) carry SEND one way only");
  }
  return hello;
}

Answer decode_answer(std::span<const std::uint8_t> bytes) {
  check_header(bytes, answer_size, answer_kind, "answer");
  Answer answer{.address = load_big_endian<std::uint64_t>(bytes.data() + 8),
                .rkey = load_big_endian<std::uint32_t>(bytes.data() + 16),
                .length = load_big_endian<std::uint32_t>(bytes.data() + 20)};
  check_size(answer.length, "buffer length");
  return answer;
}

std::uint32_t datagram_end_imm() {
  return htonl(0x524b4544);  // "RKED"
}

std::vector<std::uint8_t> encode(const DatagramCounts& counts) {
  if (counts.rows.size() > max_datagram_rows) {
    throw ProtocolError(
        fmt::format("send_bw: {} sizes do not fit one datagram (at most {})", counts.rows.size(), max_datagram_rows));
  }
  const auto head = header<8>(datagram_counts_kind);
  std::vector<std::uint8_t> bytes(head.size() + counts.rows.size() * 12);
  std::copy(head.begin(), head.end(), bytes.begin());
  bytes[6] = static_cast<std::uint8_t>(counts.kind);
  bytes[7] = static_cast<std::uint8_t>(counts.rows.size());
  for (std::size_t i = 0; i < counts.rows.size(); ++i) {
    store_big_endian(bytes.data() + 8 + i * 12, counts.rows[i].size);
    store_big_endian(bytes.data() + 12 + i * 12, counts.rows[i].count);
  }
  return bytes;
}

DatagramCounts decode_datagram_counts(std::span<const std::uint8_t> bytes) {
  check_header(bytes, 8, datagram_counts_kind, "datagram counts");
  if (bytes[6] > static_cast<std::uint8_t>(DatagramCounts::Kind::done)) {
    throw ProtocolError("send_bw datagram counts: unknown kind " + std::to_string(bytes[6]));
  }
  const std::size_t rows = bytes[7];
  if (rows > max_datagram_rows || bytes.size() < 8 + rows * 12) {
    throw ProtocolError(fmt::format("send_bw datagram counts: {} rows in {} bytes (at most {})", rows, bytes.size(),
                                    max_datagram_rows));
  }
  DatagramCounts counts{.kind = static_cast<DatagramCounts::Kind>(bytes[6]), .rows = {}};
  for (std::size_t i = 0; i < rows; ++i) {
    const SizeCount row{.size = load_big_endian<std::uint32_t>(bytes.data() + 8 + i * 12),
                        .count = load_big_endian<std::uint64_t>(bytes.data() + 12 + i * 12)};
    check_size(row.size, "datagram size");
    if (std::any_of(counts.rows.begin(), counts.rows.end(), [&](const SizeCount& r) { return r.size == row.size; })) {
      throw ProtocolError(fmt::format("send_bw datagram counts: size {} twice", row.size));
    }
    counts.rows.push_back(row);
  }
  return counts;
}

std::uint32_t encode_size_announcement(std::uint32_t size) {
  return htonl(size);
}

namespace {

std::uint32_t checked_size(std::uint32_t announced, std::uint32_t capacity) {
  if (announced == 0 || announced > capacity) {
    throw ProtocolError(fmt::format("the client announced {}-byte messages; the buffer holds {}", announced, capacity));
  }
  return announced;
}

constexpr std::array<std::uint8_t, 4> size_message_marker{'R', 'K', 'S', 'Z'};
constexpr std::array<std::uint8_t, 4> credit_message_marker{'R', 'K', 'C', 'R'};

}  // namespace

std::uint32_t decode_size_announcement(std::uint32_t imm_data, std::uint32_t capacity) {
  return checked_size(ntohl(imm_data), capacity);
}

std::array<std::uint8_t, size_message_bytes> encode_size_message(std::uint32_t size) {
  std::array<std::uint8_t, size_message_bytes> message{};
  std::copy(size_message_marker.begin(), size_message_marker.end(), message.begin());
  store_big_endian(message.data() + size_message_marker.size(), size);
  return message;
}

std::optional<std::uint32_t> decode_size_message(std::span<const std::uint8_t> bytes, std::uint32_t capacity) {
  if (bytes.size() != size_message_bytes ||
      !std::equal(size_message_marker.begin(), size_message_marker.end(), bytes.begin())) {
    return std::nullopt;
  }
  return checked_size(load_big_endian<std::uint32_t>(bytes.data() + size_message_marker.size()), capacity);
}

std::array<std::uint8_t, credit_message_bytes> encode_credit_message(std::uint32_t reposted) {
  std::array<std::uint8_t, credit_message_bytes> message{};
  std::copy(credit_message_marker.begin(), credit_message_marker.end(), message.begin());
  store_big_endian(message.data() + credit_message_marker.size(), reposted);
  return message;
}

std::optional<std::uint32_t> decode_credit_message(std::span<const std::uint8_t> bytes) {
  if (bytes.size() != credit_message_bytes ||
      !std::equal(credit_message_marker.begin(), credit_message_marker.end(), bytes.begin())) {
    return std::nullopt;
  }
  return load_big_endian<std::uint32_t>(bytes.data() + credit_message_marker.size());
}

}  // namespace rdmakit::bw
