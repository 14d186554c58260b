// The connect verdict's rules about what the kernel drops on the way: a firewall that drops
// RoCE's UDP port 4791, and a strict reverse-path filter on the netdev packets arrive on.
// Both act only where the kernel sees the packets (rxe, siw), never on a hardware RoCE NIC.
// The table that orders them is in lib/diag/connect_verdict.cpp.

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lib/diag/connect_facts.hpp"

namespace rdmakit::diag {

namespace {

struct Block {
  std::string evidence;
  std::string fix;
};

// The first thing in the ruleset that stops RoCE v2 (UDP 4791).
std::optional<Block> blocking(const Firewall& firewall) {
  if (!firewall.readable) return std::nullopt;
  for (const auto& rule : firewall.rules) {
    if ((rule.verdict == "drop" || rule.verdict == "reject") && rule.hook != "forward") {
      return Block{
          fmt::format("nftables {} {} {} handle {}: {}", rule.family, rule.table, rule.chain, rule.handle, rule.text),
          fmt::format("nft delete rule {} {} {} handle {}", rule.family, rule.table, rule.chain, rule.handle)};
    }
  }
  for (const auto& chain : firewall.drop_policy_chains) {
    const bool accepted = std::ranges::any_of(firewall.rules, [&chain](const FirewallRule& rule) {
      return rule.verdict == "accept" && fmt::format("{} {} {}", rule.family, rule.table, rule.chain) == chain;
    });
    if (!accepted) {
      return Block{fmt::format("nftables chain {} has policy drop and accepts no UDP 4791", chain),
                   fmt::format("nft insert rule {} udp dport 4791 accept", chain)};
    }
  }
  return std::nullopt;
}

// A firewall rule stops RoCE only where the kernel sees it (rxe, siw): a hardware NIC's RoCE
// traffic never meets nftables, so its host's rules are no cause.
// Rules on UDP 4791 touch RoCE v2 only where the host's stack carries it: not on a hardware
// NIC, and not on iWARP, whose traffic is TCP (siw's too).
std::optional<Block> server_block(const Facts& f) {
  if (f.peer == nullptr || !kernel_sees_roce(f.peer_port().device) || is_iwarp(f.peer_port())) return std::nullopt;
  return blocking(f.peer->view.firewall);
}

std::optional<Block> client_block(const Facts& f) {
  if (!kernel_sees_roce(f.client_port().device) || is_iwarp(f.client_port())) return std::nullopt;
  return blocking(f.local.firewall);
}

}  // namespace

bool firewall_blocks(const Facts& f) {
  if (!unanswered(f.connect) && !data_failed(f.attempt)) return false;
  return server_block(f) || client_block(f);
}

ConnectVerdict firewall_roce(const Facts& f) {
  const auto peer_block = server_block(f);
  const bool on_server = peer_block.has_value();
  const auto block = on_server ? *peer_block : *client_block(f);
  std::vector<std::string> evidence{std::string(on_server ? "server: " : "client: ") + block.evidence};
  if (f.connect != nullptr) evidence.push_back("client: " + step_text(*f.connect));
  return found("firewall_roce",
               fmt::format("the {}'s firewall drops RoCE v2 (UDP 4791)", on_server ? "server" : "client"),
               std::move(evidence), block.fix, on_server ? "server" : "client");
}

namespace {

std::string rp_filter_fix(const std::string& netdev) {
  return fmt::format("sysctl -w net.ipv4.conf.all.rp_filter=2 net.ipv4.conf.{}.rp_filter=2", netdev);
}

// Packets for `arrival` come in on it; strict reverse-path filtering drops them when the route
// back to their source leaves by another netdev.
bool strict_reverse_path(const HostView& view, const ViewNetdev* arrival) {
  if (arrival == nullptr || !view.route || view.route->netdev.empty() || view.route->netdev == arrival->name) {
    return false;
  }
  return std::max(view.rp_filter_all, arrival->rp_filter) == 1;
}

// The side whose filter drops the packets: the server's first, as its agent saw it.
struct ReversePath {
  const HostView* view;
  const ViewNetdev* arrival;
  std::string side;
  std::string arrival_address;
};

// Like the firewall, rp_filter drops only the RoCE packets the kernel sees.
std::optional<ReversePath> dropping_reverse_path(const Facts& f) {
  if (f.peer != nullptr && kernel_sees_roce(f.peer_port().device) &&
      strict_reverse_path(f.peer->view, f.peer_owner())) {
    return ReversePath{&f.peer->view, f.peer_owner(), "server", f.attempt.target};
  }
  const auto* arrival = netdev_named(f.local, f.client_netdev());
  if (kernel_sees_roce(f.client_port().device) && strict_reverse_path(f.local, arrival)) {
    return ReversePath{&f.local, arrival, "client", f.attempt.source_address};
  }
  return std::nullopt;
}

}  // namespace

bool reverse_path_filtered(const Facts& f) {
  return dropping_reverse_path(f).has_value();
}

ConnectVerdict rp_filter(const Facts& f) {
  const auto path = *dropping_reverse_path(f);
  const auto& view = *path.view;
  const auto* arrival = path.arrival;
  const auto& side = path.side;
  const auto& arrival_address = path.arrival_address;
  return found(
      "rp_filter",
      fmt::format("the {}'s strict rp_filter drops what arrives on {}: the route back to {} leaves by {}", side,
                  arrival->name, view.route->destination, view.route->netdev),
      {fmt::format("{}: packets for {} arrive on {}; ip route get {}: dev {}", side, arrival_address, arrival->name,
                   view.route->destination, view.route->netdev),
       fmt::format("{}: rp_filter all={}, {}={}: strict", side, view.rp_filter_all, arrival->name, arrival->rp_filter)},
      rp_filter_fix(arrival->name), side);
}

std::vector<std::string> firewall_blocks_seen(const Facts& f) {
  std::vector<std::string> seen;
  if (const auto block = client_block(f)) seen.push_back("client: " + block->evidence);
  if (const auto block = server_block(f)) seen.push_back("server: " + block->evidence);
  return seen;
}

}  // namespace rdmakit::diag
