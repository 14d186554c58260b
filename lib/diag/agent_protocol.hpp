#pragma once
// diag-connect's two exchanges with its agent (`diag-connect --serve`), neither trusted:
//
// The side channel (TCP, port --agent-port): after the key handshake
// (lib/net/key_handshake.hpp), the client sends one request, a JSON document
// {"version":1,"address":A,"port":P,"port_space":S,"source":C} of at most max_request_bytes;
// the agent answers one JSON document (lib/diag/connect_diagnosis.hpp's PeerAnswer, at most
// diag::max_answer_bytes) and closes. Each is one frame (lib/net/sealed_frames.hpp), tagged
// when the handshake was keyed.
//
// The rdma_cm connection (the probe itself): the client's connect carries a hello
// {be32 magic, u8 version, u8 flags, ticket (ticket_bytes, when flags has has_ticket)}, a
// ticket from the key (lib/diag/probe_ticket.hpp) that a keyed agent checks before it gives
// the probe a slot; the transport pads private data with zeros, so a hello of 5 bytes reads
// as one with no flags. The agent's accept carries an offer {be32 magic, u8 version,
// be64 address, be32 rkey, be32 length, be16 receives}: a buffer the client may WRITE and
// READ, and how many SENDs of up to `length` bytes the agent has receives posted for.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rdmakit::agent {

inline constexpr std::uint16_t default_agent_port = 7472;  // TCP
inline constexpr std::uint16_t default_probe_port = 7471;  // rdma_cm
inline constexpr std::uint32_t magic = 0x52444b43;         // "RDKC"
inline constexpr std::uint8_t version = 1;
inline constexpr std::size_t max_request_bytes = 1024;
inline constexpr std::size_t hello_bytes = 5;
inline constexpr std::size_t ticket_bytes = 32;
inline constexpr std::uint8_t has_ticket = 0x01;
// Within the 56 bytes of private data an InfiniBand or RoCE connect request carries.
inline constexpr std::size_t ticketed_hello_bytes = hello_bytes + 1 + ticket_bytes;
inline constexpr std::size_t offer_bytes = 23;
// The data check's largest transfer; an offer of less cannot serve it, more is refused.
inline constexpr std::uint32_t check_buffer_bytes = 64 * 1024;

struct Request {
  std::string address;  // the agent's address the client probes
  std::uint16_t port = 0;
  std::string port_space = "tcp";
  std::string source;  // the client's source address for the probe, "" unknown
  bool operator==(const Request&) const = default;
};

// The request's JSON document, one frame's payload.
std::string encode_request(const Request& request);
// Throws ProtocolError: too long, not JSON, wrong version, a member of the wrong type or
// beyond its bounds (port > 65535, port space not tcp/udp/ib, an address over 64 bytes or
// with characters no host name has, a source that is not a numeric address).
Request decode_request(std::string_view line);

struct Offer {
  std::uint64_t address = 0;
  std::uint32_t rkey = 0;
  std::uint32_t length = 0;
  std::uint16_t receives = 0;
  bool operator==(const Offer&) const = default;
};

using Ticket = std::array<std::uint8_t, ticket_bytes>;

struct Hello {
  std::optional<Ticket> ticket;
  bool operator==(const Hello&) const = default;
};

std::vector<std::uint8_t> encode_hello(const Hello& hello);
// nullopt: not a diag-connect client's hello (another magic or version, or a ticket flag
// without the ticket's bytes). Flags this version does not know are ignored.
std::optional<Hello> decode_hello(std::span<const std::uint8_t> private_data);

std::vector<std::uint8_t> encode_offer(const Offer& offer);
// nullopt: not an agent's offer (another listener answered; its private data, if any, is
// not ours). Throws ProtocolError for an offer with our magic that cannot be used: wrong
// version, length other than check_buffer_bytes, rkey 0, no receives or more than 64.
// The size of rdma_cm's private data is the transport's (it pads), so trailing bytes are ignored.
std::optional<Offer> decode_offer(std::span<const std::uint8_t> private_data);

// The IB CM's reject reasons as a REJECTED event's status carries them on InfiniBand and
// RoCE (IBTA table 112); the kernel keeps their words to itself (rdma_reject_msg).
inline constexpr int reject_invalid_service_id = 8;  // nothing listens on that port
inline constexpr int reject_consumer_defined = 28;   // the application called rdma_reject
std::string reject_reason_text(int reason);

}  // namespace rdmakit::agent
