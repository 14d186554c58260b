// The keyed probe's ticket (lib/diag/probe_ticket): good once, at one agent address and port,
// from one client address, within the window of the agent's clock, from the key; every other
// ticket refused in the words the agent's reject carries.

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "lib/diag/probe_ticket.hpp"
#include "lib/net/hmac_sha256.hpp"

namespace rdmakit::agent {
namespace {

using std::chrono::seconds;

SharedKey key_of(const std::string& text) {
  return SharedKey{{text.begin(), text.end()}};
}

const SharedKey key = key_of("0123456789abcdef0123456789abcdef");

TicketScope scope_of(const char* agent, std::uint16_t port, const char* client) {
  return {.agent = *IpAddress::parse(agent), .agent_port = port, .client = *IpAddress::parse(client)};
}

const TicketScope scope = scope_of("10.55.0.1", 7471, "10.55.0.2");
const WallClock::time_point now = WallClock::time_point(seconds(1'800'000'000));

TEST(ProbeTicket, IsGoodOnceForItsScope) {
  TicketBook book(key);
  const auto ticket = make_ticket(key, scope, now);
  EXPECT_EQ(book.refusal(ticket, scope, now + seconds(1)), std::nullopt);
  EXPECT_EQ(book.refusal(ticket, scope, now + seconds(2)), "the probe's ticket was used before: a replay");
  EXPECT_EQ(book.remembered(), 1U);
  // Each ticket has its own nonce: a second one is as good as the first.
  EXPECT_EQ(book.refusal(make_ticket(key, scope, now), scope, now), std::nullopt);
  // An IPv4-mapped address is the IPv4 one, as each side's rdma_cm id may name it either way.
  EXPECT_EQ(book.refusal(make_ticket(key, scope_of("::ffff:10.55.0.1", 7471, "10.55.0.2"), now), scope, now),
            std::nullopt);
}

TEST(ProbeTicket, IsRefusedFromAnotherKeyOrForAnotherScope) {
  TicketBook book(key);
  const std::string not_ours = "the probe's ticket is not from this agent's key, or not for this address and port";
  EXPECT_EQ(book.refusal(make_ticket(key_of("another key, as long as the first"), scope, now), scope, now), not_ours);
  EXPECT_EQ(book.refusal(make_ticket(key, scope_of("10.55.0.9", 7471, "10.55.0.2"), now), scope, now), not_ours);
  EXPECT_EQ(book.refusal(make_ticket(key, scope_of("10.55.0.1", 7472, "10.55.0.2"), now), scope, now), not_ours);
  EXPECT_EQ(book.refusal(make_ticket(key, scope_of("10.55.0.1", 7471, "10.55.0.3"), now), scope, now), not_ours);
  // Any byte changed: its time, its nonce, its tag.
  for (const std::size_t at : {0U, 7U, 8U, 15U, 16U, 31U}) {
    auto changed = make_ticket(key, scope, now);
    changed[at] ^= 0x01;
    EXPECT_EQ(book.refusal(changed, scope, now), not_ours) << "byte " << at;
  }
  EXPECT_EQ(book.remembered(), 0U);
}

TEST(ProbeTicket, IsRefusedOutsideTheWindowSayingHowFarTheClocksAre) {
  TicketBook book(key);
  EXPECT_EQ(book.refusal(make_ticket(key, scope, now - ticket_window), scope, now), std::nullopt);
  EXPECT_EQ(book.refusal(make_ticket(key, scope, now + ticket_window), scope, now), std::nullopt);
  EXPECT_EQ(book.refusal(make_ticket(key, scope, now - seconds(90)), scope, now),
            "the probe's ticket is dated 90 s behind this host's clock (at most 60 s): set both clocks by NTP");
  EXPECT_EQ(book.refusal(make_ticket(key, scope, now + seconds(3600)), scope, now),
            "the probe's ticket is dated 3600 s ahead of this host's clock (at most 60 s): set both clocks by NTP");
}

TEST(ProbeTicket, RemembersABoundedNumberAndForgetsThemAfterTwoWindows) {
  TicketBook book(key);
  for (std::size_t i = 0; i < max_remembered_tickets; ++i) {
    ASSERT_EQ(book.refusal(make_ticket(key, scope, now), scope, now), std::nullopt);
  }
  const auto refused = book.refusal(make_ticket(key, scope, now), scope, now);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(*refused, "4096 tickets taken in the last 120 s: try again later");
  const auto later = now + 2 * ticket_window;
  EXPECT_EQ(book.refusal(make_ticket(key, scope, later), scope, later), std::nullopt);
  EXPECT_EQ(book.remembered(), 1U);
}

TEST(ProbeTicket, TagIsTheDocumentedHmac) {
  // The layout the header documents, computed here by hand: a peer written from that text
  // (another implementation, a test's raw rdma_cm client) makes the same tag.
  const auto ticket = make_ticket(key, scope, now);
  std::vector<std::uint8_t> message;
  for (const char c : std::string("rdmakit probe ticket")) message.push_back(static_cast<std::uint8_t>(c));
  message.insert(message.end(), ticket.begin(), ticket.begin() + 16);
  const auto address = [&message](std::initializer_list<std::uint8_t> ipv4) {
    message.push_back(4);
    message.insert(message.end(), ipv4);
    message.insert(message.end(), 12, 0);
  };
  address({10, 55, 0, 1});
  message.push_back(7471 >> 8);
  message.push_back(7471 & 0xff);
  address({10, 55, 0, 2});
  const auto whole = net::hmac_sha256(key.bytes, message);
  EXPECT_TRUE(std::equal(whole.begin(), whole.begin() + 16, ticket.begin() + 16));
  std::uint64_t dated_ms = 0;
  for (std::size_t i = 0; i < 8; ++i) dated_ms = dated_ms << 8 | ticket[i];
  EXPECT_EQ(dated_ms, 1'800'000'000'000U);
}

}  // namespace
}  // namespace rdmakit::agent
