#pragma once
// Wire formats the tools exchange, with encode/decode that never trust the peer.
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

// send_bw: the whole key exchange rides in CM private data, versioned. The client's
// rdma_connect carries a Hello (what it will do, and for write latency its own buffer);
// the server's rdma_accept carries an Answer (its buffer for RDMA WRITE/READ), or its
// rdma_reject a Refusal saying why. Big-endian; the Hello's 40 bytes fit the 56 an IB CM
// REQ leaves to rdma_connect. A peer speaking another version is refused with a message.
namespace rdmakit::bw {

inline constexpr std::uint32_t magic = 0x524b4257;  // "RKBW"
inline constexpr std::uint8_t version = 2;
inline constexpr std::size_t hello_size = 40;
inline constexpr std::size_t answer_size = 24;
inline constexpr std::size_t max_refusal_text = 100;  // an IB CM REJ carries 148 bytes
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
// Why a server turned a client down; the text is cut to max_refusal_text bytes.
std::vector<std::uint8_t> encode_refusal(std::string_view reason);

// Throw ProtocolError for short data, a foreign magic, another version, an unknown
// operation or test, sizes outside [1, max_message_size], a depth outside 1..65536, queue
// pair counts outside 1..max_queue_pairs, a write-latency reply buffer smaller than the
// messages, or atomics that are not 8 bytes or not one way. CM private data arrives padded,
// so `bytes` may be longer than the message.
Hello decode_hello(std::span<const std::uint8_t> bytes);
Answer decode_answer(std::span<const std::uint8_t> bytes);
// The reason in a send_bw server's reject, non-printable bytes replaced by '?'; empty
// when the bytes are not a send_bw refusal (another server, or a plain CM reject).
std::optional<std::string> decode_refusal(std::span<const std::uint8_t> bytes);

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
