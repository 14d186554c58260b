#pragma once
// The ticket in a keyed diag-connect probe's hello (lib/diag/agent_protocol.hpp): a proof,
// from the --key-file key, that this probe comes from a holder of the key, made for this one
// connection. A keyed agent checks it before the probe takes one of its slots
// (--max-connections), so a host without the key cannot hold them, however many connect
// requests it sends. The probe comes before the side channel (whose handshake proves the key
// too) because the agent's answer reports what the probe left behind, so the ticket proves
// the key in the connect request itself, in the 56 bytes of private data a REQ has room for:
//
//   be64 unix time (ms) | nonce (8 random bytes) | tag (16 bytes)
//   tag = HMAC-SHA256(key, "rdmakit probe ticket" || be64 time || nonce
//                          || agent address || be16 agent port || client address)[0..16)
//
// (an address is 1 byte, 4, 6 or 0 for one that is not IP, then 16 bytes: IPv4's 4 first, not
// mapped, then zeros). A ticket is
// good at one agent address and port, from one client address, within ticket_window of the
// agent's clock, once: the agent remembers the nonces it took until they expire.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "lib/diag/agent_protocol.hpp"
#include "lib/net/peer_gate.hpp"
#include "lib/net/shared_key.hpp"

namespace rdmakit::agent {

using WallClock = std::chrono::system_clock;

// How far the ticket's time may be from the agent's clock, either way: the two hosts' clocks
// may differ by this much (NTP keeps a cluster within milliseconds).
inline constexpr std::chrono::seconds ticket_window{60};
// The nonces remembered at once; an agent refuses tickets past it until old ones expire.
inline constexpr std::size_t max_remembered_tickets = 4096;

// Whom a ticket is for, as each side's rdma_cm id names the two ends.
struct TicketScope {
  IpAddress agent;  // AF_UNSPEC (all zero) for an address that is not IP (AF_IB)
  std::uint16_t agent_port = 0;
  IpAddress client;
};

// A fresh ticket (random nonce) for `scope` at `now`.
Ticket make_ticket(const SharedKey& key, const TicketScope& scope, WallClock::time_point now);

// The agent's side: checks tickets and remembers the ones it took.
class TicketBook {
 public:
  explicit TicketBook(SharedKey key) : key_(std::move(key)) {}
  // nullopt when `ticket` is good for `scope` at `now` and was not taken before (it is taken
  // now); otherwise why not, in a line the agent sends back in its reject.
  std::optional<std::string> refusal(const Ticket& ticket, const TicketScope& scope, WallClock::time_point now);
  std::size_t remembered() const { return taken_.size(); }

 private:
  SharedKey key_;
  // nonce -> when it may be forgotten (a ticket that old is refused by its time anyway)
  std::map<std::uint64_t, WallClock::time_point> taken_;
};

}  // namespace rdmakit::agent
