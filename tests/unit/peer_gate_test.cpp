#include <CLI/CLI.hpp>

#include "lib/net/peer_gate.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"

namespace rdmakit {
namespace {

using namespace std::chrono_literals;

sockaddr_storage peer(const std::string& text, std::uint16_t port = 4000) {
  sockaddr_storage storage{};
  if (text.find(':') == std::string::npos) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    inet_pton(AF_INET, text.c_str(), &v4->sin_addr);
  } else {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    inet_pton(AF_INET6, text.c_str(), &v6->sin6_addr);
  }
  return storage;
}

const sockaddr* as_sockaddr(const sockaddr_storage& storage) {
  return reinterpret_cast<const sockaddr*>(&storage);
}

IpAddress ip(const std::string& text) {
  return *IpAddress::parse(text);
}

TEST(IpAddress, MappedAddressesAreIpv4UnlessKept) {
  const auto as_ipv4 = IpAddress::parse("::ffff:10.0.0.1");
  ASSERT_TRUE(as_ipv4.has_value());
  EXPECT_EQ(as_ipv4->family, AF_INET);
  EXPECT_EQ(as_ipv4->to_string(), "10.0.0.1");
  const auto kept = IpAddress::parse("::ffff:10.0.0.1", MappedAddress::kept);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->family, AF_INET6);
  EXPECT_EQ(kept->to_string(), "::ffff:10.0.0.1");
  EXPECT_EQ(IpAddress::parse("10.0.0.1", MappedAddress::kept)->family, AF_INET);
  EXPECT_FALSE(IpAddress::parse(std::string_view("10.0.0.1\0x", 10)).has_value());
  EXPECT_FALSE(IpAddress::parse("10.0.0.1/24").has_value());
}

TEST(Cidr, ClearsHostBitsAndMatchesItsNetwork) {
  const auto cidr = Cidr::parse("10.0.0.77/24", "--allow");
  EXPECT_EQ(cidr.to_string(), "10.0.0.0/24");
  EXPECT_TRUE(cidr.contains(ip("10.0.0.1")));
  EXPECT_FALSE(cidr.contains(ip("10.0.1.1")));
  EXPECT_FALSE(cidr.contains(ip("fd00::1")));
  EXPECT_EQ(Cidr::parse("10.1.2.3/20", "--allow").to_string(), "10.1.0.0/20");
}

TEST(Cidr, BareAddressIsOneHost) {
  EXPECT_EQ(Cidr::parse("10.0.0.5", "--allow").to_string(), "10.0.0.5/32");
  EXPECT_EQ(Cidr::parse("fd00::5", "--allow").to_string(), "fd00::5/128");
  EXPECT_FALSE(Cidr::parse("10.0.0.5", "--allow").contains(ip("10.0.0.6")));
}

TEST(Cidr, Ipv6) {
  const auto cidr = Cidr::parse("fd00:1::/64", "--allow");
  EXPECT_TRUE(cidr.contains(ip("fd00:1::abcd")));
  EXPECT_FALSE(cidr.contains(ip("fd00:2::1")));
  EXPECT_TRUE(Cidr::parse("::/0", "--allow").contains(ip("2001:db8::1")));
  EXPECT_TRUE(Cidr::parse("0.0.0.0/0", "--allow").contains(ip("192.0.2.1")));
}

TEST(Cidr, MappedPeerMatchesIpv4Network) {
  const auto cidr = Cidr::parse("10.0.0.0/24", "--allow");
  EXPECT_TRUE(cidr.contains(ip("::ffff:10.0.0.9")));
  EXPECT_EQ(Cidr::parse("::ffff:10.0.0.0/120", "--allow").to_string(), "10.0.0.0/24");
}

TEST(Cidr, ParseErrorsNameTheFlagAndText) {
  for (const auto* bad : {"10.0.0/24", "10.0.0.0/33", "fd00::/129", "10.0.0.0/", "10.0.0.0/x", "host", ""}) {
    try {
      (void)Cidr::parse(bad, "--allow");
      FAIL() << bad;
    } catch (const UsageError& error) {
      EXPECT_NE(std::string(error.what()).find(std::string("--allow '") + bad + "'"), std::string::npos)
          << error.what();
    }
  }
}

// A netdev's address as the host lists it: the subnet, or nothing for anything else.
TEST(Cidr, ReadsAnInterfaceAddress) {
  const auto v4 = Cidr::read("10.58.2.10/16");
  ASSERT_TRUE(v4.has_value());
  EXPECT_EQ(v4->to_string(), "10.58.0.0/16");
  EXPECT_EQ(v4->prefix(), 16U);
  EXPECT_TRUE(v4->contains(ip("10.58.200.1")));
  EXPECT_FALSE(v4->contains(ip("10.59.0.1")));
  EXPECT_EQ(Cidr::read("fd00::2/64")->to_string(), "fd00::/64");
  for (const auto* bad : {"10.58.2.10", "10.58.2.10/", "10.58.2.10/33", "10.58.2.10/16x", "host/8", ""}) {
    EXPECT_FALSE(Cidr::read(bad).has_value()) << bad;
  }
}

TEST(AllowList, CommaListsAndRepeats) {
  const auto list = AllowList::parse({"10.0.0.0/24, 192.0.2.7", "fd00::/8"}, "--allow");
  ASSERT_EQ(list.cidrs().size(), 3U);
  EXPECT_EQ(list.to_string(), "10.0.0.0/24, 192.0.2.7/32, fd00::/8");
  EXPECT_TRUE(list.allows(ip("192.0.2.7")));
  EXPECT_FALSE(list.allows(ip("192.0.2.8")));
  EXPECT_THROW((void)AllowList::parse({"10.0.0.0/24,"}, "--allow"), UsageError);
}

TEST(AllowList, EmptyIsAny) {
  const AllowList list;
  EXPECT_TRUE(list.any());
  EXPECT_TRUE(list.allows(ip("203.0.113.1")));
  EXPECT_EQ(list.to_string(), "any address");
}

std::vector<InterfaceAddress> host_interfaces() {
  return {{.netdev = "lo", .address = ip("127.0.0.1"), .prefix = 8},
          {.netdev = "lo", .address = ip("::1"), .prefix = 128},
          {.netdev = "rxe0", .address = ip("10.0.0.1"), .prefix = 24},
          {.netdev = "rxe0", .address = ip("10.99.0.1"), .prefix = 32},
          {.netdev = "rxe0", .address = ip("fd00::1"), .prefix = 64},
          {.netdev = "eth1", .address = ip("192.168.5.3"), .prefix = 16}};
}

TEST(LocalSubnets, WildcardTakesEveryInterfaceLoopbackIncluded) {
  const auto expected = "127.0.0.0/8, ::1/128, 10.0.0.0/24, 10.99.0.1/32, fd00::/64, 192.168.0.0/16";
  EXPECT_EQ(local_subnets("", host_interfaces()).to_string(), expected);
  EXPECT_EQ(local_subnets("::", host_interfaces()).to_string(), expected);
  EXPECT_EQ(local_subnets("0.0.0.0", host_interfaces()).to_string(), expected);
}

TEST(LocalSubnets, BoundAddressTakesItsInterfaceInItsFamily) {
  EXPECT_EQ(local_subnets("10.0.0.1", host_interfaces()).to_string(), "10.0.0.0/24, 10.99.0.1/32");
  EXPECT_EQ(local_subnets("fd00::1", host_interfaces()).to_string(), "fd00::/64");
  EXPECT_EQ(local_subnets("192.168.5.3", host_interfaces()).to_string(), "192.168.0.0/16");
}

TEST(LocalSubnets, AddressNoInterfaceHoldsIsItselfOnly) {
  EXPECT_EQ(local_subnets("10.5.5.5", host_interfaces()).to_string(), "10.5.5.5/32");
}

TEST(LocalSubnets, AnInterfaceWithoutANetmaskIsItsAddressAlone) {
  const std::vector<InterfaceAddress> interfaces = {{.netdev = "tun0", .address = ip("10.8.0.5"), .prefix = 0},
                                                    {.netdev = "tun0", .address = ip("fd08::5"), .prefix = 0}};
  EXPECT_EQ(local_subnets("", interfaces).to_string(), "10.8.0.5/32, fd08::5/128");
  EXPECT_EQ(local_subnets("10.8.0.5", interfaces).to_string(), "10.8.0.5/32");
}

TEST(LocalSubnets, ThisHostHasLoopback) {
  const auto list = local_subnets("", interface_addresses());
  EXPECT_TRUE(list.allows(ip("127.0.0.1"))) << list.to_string();
}

TEST(PeerGate, RefusesOutsideTheAllowList) {
  PeerGate gate({.allow = AllowList::parse({"10.0.0.0/24"}, "--allow")});
  const auto now = std::chrono::steady_clock::now();
  EXPECT_TRUE(gate.admit(as_sockaddr(peer("10.0.0.2")), now).admitted());
  EXPECT_TRUE(gate.admit(as_sockaddr(peer("::ffff:10.0.0.3")), now).admitted());
  const auto refused = gate.admit(as_sockaddr(peer("10.99.0.1")), now);
  ASSERT_FALSE(refused.admitted());
  EXPECT_EQ(*refused.refused, RefusalCause::not_allowed);
  EXPECT_EQ(refused.reason, "not in --allow 10.0.0.0/24");
  EXPECT_EQ(gate.refused().not_allowed, 1U);
  EXPECT_EQ(gate.refused().total(), 1U);
}

// A flood of refusals: a burst of lines, then one a second, the rest counted into the next.
TEST(PeerGate, RefusalsAreLoggedAtARateNotOneLineEach) {
  std::ostringstream captured;
  const auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  auto logger = std::make_shared<spdlog::logger>("gate_test", sink);
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(logger);
  PeerGate gate({.allow = AllowList::parse({"10.0.0.0/24"}, "--allow")});
  const auto start = std::chrono::steady_clock::now();
  for (int k = 0; k < 300; ++k) (void)gate.admit(as_sockaddr(peer("10.99.0.1")), start);
  (void)gate.admit(as_sockaddr(peer("10.99.0.1")), start + std::chrono::seconds(1));
  spdlog::set_default_logger(previous);
  const auto text = captured.str();
  const auto lines = std::count(text.begin(), text.end(), '\n');
  EXPECT_EQ(lines, static_cast<long>(refusal_log_burst) + 1) << text;
  EXPECT_NE(text.find("(290 more refused before it, not logged)"), std::string::npos) << text;
  EXPECT_EQ(gate.refused().not_allowed, 301U);
}

TEST(PeerGate, CapsConnectionsHeldAtOnce) {
  PeerGate gate({.allow = {}, .max_clients = 2});
  const auto now = std::chrono::steady_clock::now();
  auto first = gate.admit(as_sockaddr(peer("10.0.0.2")), now);
  auto second = gate.admit(as_sockaddr(peer("10.0.0.3")), now);
  ASSERT_TRUE(first.admitted() && second.admitted());
  EXPECT_EQ(gate.held(), 2U);
  const auto third = gate.admit(as_sockaddr(peer("10.0.0.4")), now);
  ASSERT_FALSE(third.admitted());
  EXPECT_EQ(third.reason, "already serving 2 clients");
  { const auto gone = std::move(first.slot); }
  EXPECT_EQ(gate.held(), 1U);
  EXPECT_TRUE(gate.admit(as_sockaddr(peer("10.0.0.4")), now).admitted());
  EXPECT_EQ(gate.held(), 1U);  // the admission above was a temporary: its slot is gone
  EXPECT_EQ(gate.refused().too_many, 1U);
}

// One address may hold only its share: a host that opens many connections leaves room for others.
TEST(PeerGate, CapsConnectionsHeldFromOnePeer) {
  PeerGate gate({.allow = {}, .max_clients = 4, .max_per_peer = 2});
  const auto now = std::chrono::steady_clock::now();
  auto first = gate.admit(as_sockaddr(peer("10.0.0.2", 4000)), now);
  auto second = gate.admit(as_sockaddr(peer("::ffff:10.0.0.2", 4001)), now);
  ASSERT_TRUE(first.admitted() && second.admitted());
  const auto third = gate.admit(as_sockaddr(peer("10.0.0.2", 4002)), now);
  ASSERT_FALSE(third.admitted());
  EXPECT_EQ(third.reason, "already serving 2 connections from it");
  auto other = gate.admit(as_sockaddr(peer("10.0.0.3")), now);
  EXPECT_TRUE(other.admitted());
  EXPECT_EQ(gate.held_from(*IpAddress::parse("10.0.0.2")), 2U);
  { const auto gone = std::move(first.slot); }
  EXPECT_EQ(gate.held_from(*IpAddress::parse("10.0.0.2")), 1U);
  EXPECT_EQ(gate.held(), 2U);
  auto again = gate.admit(as_sockaddr(peer("10.0.0.2", 4003)), now);
  EXPECT_TRUE(again.admitted());
  EXPECT_EQ(gate.refused().too_many, 1U);
  { const auto gone = std::move(second.slot); }
  { const auto gone = std::move(again.slot); }
  EXPECT_EQ(gate.held_from(*IpAddress::parse("10.0.0.2")), 0U);
}

TEST(PeerGate, RateLimitsEachPeerInItsWindow) {
  PeerGate gate({.allow = {}, .peer_rate = 3});
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(gate.admit(as_sockaddr(peer("10.0.0.2")), start + i * 1s).admitted());
  const auto fourth = gate.admit(as_sockaddr(peer("10.0.0.2")), start + 3s);
  ASSERT_FALSE(fourth.admitted());
  EXPECT_EQ(fourth.reason, "more than 3 new connections from it in 10 s");
  EXPECT_TRUE(gate.admit(as_sockaddr(peer("10.0.0.3")), start + 3s).admitted());  // another peer
  // The ports differ, the peer is the same.
  EXPECT_FALSE(gate.admit(as_sockaddr(peer("10.0.0.2", 5555)), start + 4s).admitted());
  // A peer that keeps trying stays refused; one that pauses a window is served again.
  EXPECT_TRUE(gate.admit(as_sockaddr(peer("10.0.0.2")), start + 15s).admitted());
  EXPECT_EQ(gate.refused().too_fast, 2U);
}

TEST(PeerGate, SprayOfSourcesKeepsTheTableBounded) {
  PeerGate gate({.allow = {}, .peer_rate = 1, .tracked = 8});
  const auto now = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(gate.admit(as_sockaddr(peer(fmt::format("10.1.0.{}", i))), now).admitted());
  }
  // The latest peers are still remembered.
  EXPECT_FALSE(gate.admit(as_sockaddr(peer("10.1.0.99")), now).admitted());
}

TEST(PeerGate, SlotsReleaseFromOtherThreads) {
  PeerGate gate({.allow = {}, .max_clients = 64});
  std::vector<std::jthread> threads;
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&gate] {
      for (int j = 0; j < 100; ++j) {
        auto admitted = gate.admit(as_sockaddr(peer("10.0.0.2")), std::chrono::steady_clock::now());
        EXPECT_TRUE(admitted.admitted());
      }
    });
  }
  threads.clear();
  EXPECT_EQ(gate.held(), 0U);
}

TEST(RefusedPeers, JsonAlwaysTextOnlyWhenSome) {
  nlohmann::json document;
  RefusedPeers({}).add_to(document);
  EXPECT_EQ(document["refused_peers"]["total"], 0);
  EXPECT_EQ(RefusedPeers({}).note(), "");
  const RefusedPeers some({.not_allowed = 2, .too_fast = 1, .too_many = 0});
  some.add_to(document);
  EXPECT_EQ(document["refused_peers"]["total"], 3);
  EXPECT_EQ(document["refused_peers"]["not_allowed"], 2);
  EXPECT_EQ(some.note(), "refused 3 connections: 2 not in --allow, 1 over --peer-rate, 0 over --max-clients\n");
}

TEST(GateOptions, FlagsRepeatAndTakeCommaLists) {
  CLI::App app;
  GateOptions options;
  options.add_to(app, {});
  app.parse("--allow 10.0.0.0/24,10.1.0.0/24 --allow fd00::/8 --max-clients 5", false);
  const auto limits = options.limits("", {});
  EXPECT_EQ(limits.allow.cidrs().size(), 3U);
  EXPECT_EQ(limits.max_clients, 5U);
  EXPECT_TRUE(GateOptions{}.limits("", {}).allow.any());
  EXPECT_FALSE(
      GateOptions{}.limits("", {.local_default = true, .cap = true, .rate = true, .per_peer = false}).allow.any());
  EXPECT_THROW(app.parse("--allow 10.0.0.300", false), CLI::ValidationError);
}

// rping's and rdma_server's gates: one address holds at most half the slots unless told.
TEST(GateOptions, PerPeerCapIsHalfTheClientsUnlessGiven) {
  const GateFlags per_peer{.local_default = false, .cap = true, .rate = true, .per_peer = true};
  CLI::App app;
  GateOptions options{.allow = {}, .max_clients = 64, .peer_rate = 0, .max_per_peer = {}};
  options.add_to(app, per_peer);
  app.parse("", false);
  EXPECT_EQ(options.limits("", per_peer).max_per_peer, 32U);
  EXPECT_EQ(options.limits("", {}).max_per_peer, 0U);  // send_bw: its client's queue pairs share an address
  app.parse("--max-clients 5", false);
  EXPECT_EQ(options.limits("", per_peer).max_per_peer, 3U);
  app.parse("--max-clients 0", false);
  EXPECT_EQ(options.limits("", per_peer).max_per_peer, 0U);
  app.parse("--max-per-peer 7", false);
  EXPECT_EQ(options.limits("", per_peer).max_per_peer, 7U);
  CLI::App without;
  GateOptions plain;
  plain.add_to(without, {});
  EXPECT_THROW(without.parse("--max-per-peer 7", false), CLI::ExtrasError);
}

TEST(AnsweringLine, SaysHowToWiden) {
  EXPECT_EQ(answering_line(AllowList::parse({"10.0.0.0/24,127.0.0.0/8"}, "--allow")),
            "answering only 10.0.0.0/24, 127.0.0.0/8 (--allow to widen)");
}

}  // namespace
}  // namespace rdmakit
