#include "lib/diag/probe_ticket.hpp"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "lib/base/big_endian.hpp"
#include "lib/net/hmac_sha256.hpp"

namespace rdmakit::agent {

namespace {

constexpr std::string_view ticket_label = "rdmakit probe ticket";
constexpr std::size_t time_bytes = 8;
constexpr std::size_t nonce_bytes = 8;
constexpr std::size_t tag_bytes = ticket_bytes - time_bytes - nonce_bytes;

void append_address(std::vector<std::uint8_t>& message, const IpAddress& address) {
  const std::uint8_t version = address.family == AF_INET ? 4 : address.family == AF_INET6 ? 6 : 0;
  message.push_back(version);
  message.insert(message.end(), address.bytes.begin(), address.bytes.end());
}

// The first tag_bytes of the HMAC over the ticket's time and nonce (its first 16 bytes) and
// the scope.
std::array<std::uint8_t, tag_bytes> ticket_tag(const SharedKey& key, const Ticket& ticket, const TicketScope& scope) {
  std::vector<std::uint8_t> message(ticket_label.begin(), ticket_label.end());
  message.insert(message.end(), ticket.begin(), ticket.begin() + time_bytes + nonce_bytes);
  append_address(message, scope.agent);
  std::array<std::uint8_t, 2> port{};
  store_big_endian(port.data(), scope.agent_port);
  message.insert(message.end(), port.begin(), port.end());
  append_address(message, scope.client);
  const auto whole = net::hmac_sha256(key.bytes, message);
  std::array<std::uint8_t, tag_bytes> tag{};
  std::copy_n(whole.begin(), tag_bytes, tag.begin());
  return tag;
}

std::int64_t unix_ms(WallClock::time_point when) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(when.time_since_epoch()).count();
}

}  // namespace

Ticket make_ticket(const SharedKey& key, const TicketScope& scope, WallClock::time_point now) {
  Ticket ticket{};
  store_big_endian(ticket.data(), static_cast<std::uint64_t>(unix_ms(now)));
  if (RAND_bytes(ticket.data() + time_bytes, static_cast<int>(nonce_bytes)) != 1) {
    throw std::runtime_error("RAND_bytes: libcrypto has no random bytes to give");
  }
  const auto tag = ticket_tag(key, ticket, scope);
  std::ranges::copy(tag, ticket.begin() + time_bytes + nonce_bytes);
  return ticket;
}

std::optional<std::string> TicketBook::refusal(const Ticket& ticket, const TicketScope& scope,
                                               WallClock::time_point now) {
  const auto tag = ticket_tag(key_, ticket, scope);
  if (CRYPTO_memcmp(tag.data(), ticket.data() + time_bytes + nonce_bytes, tag_bytes) != 0) {
    return "the probe's ticket is not from this agent's key, or not for this address and port";
  }
  const auto ahead_ms = static_cast<std::int64_t>(load_big_endian<std::uint64_t>(ticket.data())) - unix_ms(now);
  if (std::chrono::milliseconds(std::abs(ahead_ms)) > ticket_window) {
    return fmt::format(
        "the probe's ticket is dated {:.0f} s {} this host's clock (at most {} s): set both clocks by NTP",
        std::abs(static_cast<double>(ahead_ms)) / 1000, ahead_ms > 0 ? "ahead of" : "behind", ticket_window.count());
  }
  std::erase_if(taken_, [now](const auto& entry) { return entry.second <= now; });
  const auto nonce = load_big_endian<std::uint64_t>(ticket.data() + time_bytes);
  if (taken_.contains(nonce)) return "the probe's ticket was used before: a replay";
  if (taken_.size() >= max_remembered_tickets) {
    return fmt::format("{} tickets taken in the last {} s: try again later", taken_.size(), 2 * ticket_window.count());
  }
  taken_.emplace(nonce, now + 2 * ticket_window);
  return std::nullopt;
}

}  // namespace rdmakit::agent
