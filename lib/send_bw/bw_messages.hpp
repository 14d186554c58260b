#pragma once
// send_bw's messages, with encode/decode that never trust the peer.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lib/rdma/refusal.hpp"

// send_bw: the whole key exchange rides in CM private data, versioned. The client's
// rdma_connect carries a Hello (what it will do, and for write latency its own buffer);
// the server's rdma_accept carries an Answer (its buffer for RDMA WRITE/READ), or its
// rdma_reject a Refusal saying why. Big-endian; the Hello's 40 bytes fit the 56 an IB CM
// REQ leaves to rdma_connect. A peer speaking another version is refused with a message.
namespace rdmakit::bw {

inline constexpr std::uint32_t magic = private_data_magic;
inline constexpr std::uint8_t version = private_data_version;
inline constexpr std::size_t hello_size = 40;
inline constexpr std::size_t answer_size = 24;
inline constexpr const char* default_port = "18515";  // perftest's default port
inline constexpr std::uint32_t max_message_size = 1U << 30;
inline constexpr std::uint16_t max_queue_pairs = 64;

// atomic: 8-byte fetch-and-add or compare-and-swap on the server's buffer (which of the two
// is the client's business; the server only lets them in).
enum class Operation : std::uint8_t { send = 0, write = 1, read = 2, atomic = 3 };
inline constexpr std::uint32_t atomic_size = 8;
std::string to_string(Operation operation);
// Whether the client's message carries its own data to the server (SEND, WRITE), so that it
// may go inline; a READ or an atomic fetches into the client's buffer instead.
constexpr bool carries_payload(Operation operation) {
  return operation == Operation::send || operation == Operation::write;
}

enum class Test : std::uint8_t { bandwidth = 0, latency = 1 };
std::string to_string(Test test);

struct Hello {
  Operation operation = Operation::send;
  Test test = Test::bandwidth;
  std::uint32_t max_size = 0;  // largest message the client will send (the server sizes its buffer)
  std::uint32_t depth = 0;     // receives the server keeps posted (send)
  bool bidirectional = false;  // the server sends back as much as it receives
  // -c UD: the connection is rdma_cm's UDP port space (SIDR), the messages datagrams; send
  // only, and the end of the stream is the DatagramCounts exchange below.
  bool datagram = false;
  std::uint8_t path_mtu = 0;  // enum ibv_mtu (1 = 256 ... 5 = 4096); 0: the route's
  std::uint16_t queue_pairs = 1;
  std::uint16_t queue_pair_index = 0;  // which of them this connection is
  // Write latency: where the server writes its answers (the client's buffer).
  std::uint64_t reply_address = 0;
  std::uint32_t reply_rkey = 0;
  std::uint32_t reply_length = 0;

  bool operator==(const Hello&) const = default;
};

// Whether the client's test leaves the server nothing to reap or answer until the
// disconnect: write, read and atomic bandwidth (-b is SEND only), read and atomic latency.
// Such a server sleeps on its CQ rather than spin: on a small host the core it would burn
// is the one the client's device work needs (rxe runs it in the client's system calls).
constexpr bool server_idle(const Hello& hello) {
  if (hello.test == Test::latency) return !carries_payload(hello.operation);
  return hello.operation != Operation::send;
}

struct Answer {
  std::uint64_t address = 0;  // the server's buffer, for RDMA WRITE/READ
  std::uint32_t rkey = 0;
  std::uint32_t length = 0;

  bool operator==(const Answer&) const = default;
};

std::array<std::uint8_t, hello_size> encode(const Hello& hello);
std::array<std::uint8_t, answer_size> encode(const Answer& answer);

// Throw ProtocolError for short data, a foreign magic, another version, an unknown
// operation or test, sizes outside [1, max_message_size], a depth outside 1..65536, queue
// pair counts outside 1..max_queue_pairs, a write-latency reply buffer smaller than the
// messages, or atomics that are not 8 bytes or not one way. CM private data arrives padded,
// so `bytes` may be longer than the message.
Hello decode_hello(std::span<const std::uint8_t> bytes);
Answer decode_answer(std::span<const std::uint8_t> bytes);

// -c UD has no disconnect to end a stream and no acknowledgement to count what arrived. Once
// its rows are done, the client sends `sent` (its datagrams per size, warm-up included) as
// SEND-with-immediate datagram_end_imm, again every so often until the server answers with
// `received` (what arrived per size), then `done`. Both sides count what was lost. The rows
// fit one 256-byte datagram (the smallest MTU).
inline constexpr std::size_t max_datagram_rows = 20;
inline constexpr std::size_t datagram_counts_max_size = 8 + max_datagram_rows * 12;
// The immediate that marks a control datagram (network byte order, as ibv_wc.imm_data).
std::uint32_t datagram_end_imm();
struct SizeCount {
  std::uint32_t size = 0;
  std::uint64_t count = 0;
  bool operator==(const SizeCount&) const = default;
};
struct DatagramCounts {
  enum class Kind : std::uint8_t { sent, received, done };
  Kind kind = Kind::sent;
  std::vector<SizeCount> rows;  // sizes in 1..max_message_size, each once
  bool operator==(const DatagramCounts&) const = default;
};
std::vector<std::uint8_t> encode(const DatagramCounts& counts);  // ProtocolError above max_datagram_rows
// ProtocolError for short or foreign data, an unknown kind, more rows than the bytes or
// max_datagram_rows hold, a size out of range or repeated.
DatagramCounts decode_datagram_counts(std::span<const std::uint8_t> bytes);

// Latency tests announce each message size in the immediate data of a zero-length SEND,
// in network byte order as ibv_wc.imm_data holds it. The server takes a size only within
// 1..capacity (its receive buffer, whose last byte for that size the write test polls);
// otherwise ProtocolError.
std::uint32_t encode_size_announcement(std::uint32_t size);
std::uint32_t decode_size_announcement(std::uint32_t imm_data, std::uint32_t capacity);

// Where the device carries no immediate data (iWARP), an announcement is a SEND of its own,
// size_message_bytes long: a marker ("RKSZ") and the size in network byte order, sent inline
// so that no ping buffer ever holds the marker. decode_size_message: nullopt for a message
// that is not one (another length, another marker: a ping); the size as above.
inline constexpr std::size_t size_message_bytes = 8;
std::array<std::uint8_t, size_message_bytes> encode_size_message(std::uint32_t size);
std::optional<std::uint32_t> decode_size_message(std::span<const std::uint8_t> bytes, std::uint32_t capacity);

// iWARP has no RNR retry: a SEND that finds no receive posted ends the connection. So a SEND
// bandwidth stream there is paced by credits, as perftest's is: the server posts at least
// stream_credits receives on each queue pair before it accepts, and after reposting every
// credit_batch of them it SENDs (inline) a credit message: a marker ("RKCR") and the total of
// receives it has reposted on that queue pair, modulo 2^32, in network byte order. The client
// sends no more than stream_credits plus that total. decode_credit_message: nullopt for a
// message that is not one.
inline constexpr std::uint32_t stream_credits = 512;
inline constexpr std::uint32_t credit_batch = 64;
inline constexpr std::size_t credit_message_bytes = 8;
std::array<std::uint8_t, credit_message_bytes> encode_credit_message(std::uint32_t reposted);
std::optional<std::uint32_t> decode_credit_message(std::span<const std::uint8_t> bytes);

}  // namespace rdmakit::bw
