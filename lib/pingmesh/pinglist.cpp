#include "lib/pingmesh/pinglist.hpp"

#include <algorithm>
#include <array>
#include <map>

#include <fmt/format.h>

#include "lib/base/config_lines.hpp"
#include "lib/base/error.hpp"
#include "lib/net/ip_address.hpp"

namespace rdmakit::pingmesh {
namespace {

constexpr std::size_t max_name_length = 64;

bool is_address(std::string_view word) {
  return IpAddress::parse(word).has_value();
}

bool is_name(std::string_view word) {
  return !word.empty() && word.size() <= max_name_length && std::all_of(word.begin(), word.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

}  // namespace

std::vector<Peer> parse_pinglist(std::string_view text, std::string_view origin) {
  std::vector<Peer> peers;
  std::map<std::string, std::size_t, std::less<>> line_of_address;
  std::map<std::string, std::size_t, std::less<>> line_of_name;
  for (const NumberedLine& line : entries_of(text, false)) {
    const auto refuse = [&](const std::string& why) {
      throw UsageError(fmt::format("{}:{}: {}", origin, line.number, why));
    };
    const std::vector<std::string_view> words = words_in(line.text);
    if (words.size() > 2) refuse(fmt::format("'{}': expected ADDRESS [NAME]", line.text));
    if (!is_address(words[0])) refuse(fmt::format("'{}' is not an IPv4 or IPv6 address", words[0]));
    Peer peer{std::string(words[0]), std::string(words.size() == 2 ? words[1] : words[0])};
    if (words.size() == 2 && !is_name(words[1])) {
      refuse(fmt::format("'{}' is not a host name (letters, digits, '.', '_', '-'; at most {})", words[1],
                         max_name_length));
    }
    if (const auto seen = line_of_address.find(peer.address); seen != line_of_address.end()) {
      refuse(fmt::format("{} is already on line {}", peer.address, seen->second));
    }
    if (const auto seen = line_of_name.find(peer.name); seen != line_of_name.end()) {
      refuse(fmt::format("the name {} is already on line {}", peer.name, seen->second));
    }
    line_of_address.emplace(peer.address, line.number);
    line_of_name.emplace(peer.name, line.number);
    peers.push_back(std::move(peer));
  }
  return peers;
}

std::vector<Peer> read_pinglist(const std::string& path) {
  return parse_pinglist(read_config_text(path), path);
}

TargetPlan plan_targets(const std::vector<Peer>& peers, const mesh::Topology& topology, std::string_view self_name,
                        std::string_view self_address, const Rates& rates, std::uint64_t round) {
  TargetPlan plan;
  const std::string own_leaf = topology.leaf_of(std::string(self_name));
  // Under each other leaf, its peers in the pinglist's order; a peer the topology does not
  // name is a leaf of its own (one peer: always in the sample).
  std::map<std::string, std::vector<const Peer*>> others;
  for (const Peer& peer : peers) {
    if (peer.name == self_name || peer.address == self_address) continue;
    const std::string leaf = own_leaf.empty() ? std::string() : topology.leaf_of(peer.name);
    if (own_leaf.empty() || leaf == own_leaf) {
      plan.targets.push_back(Target{peer, rates.in_leaf_per_s, true});
    } else {
      others[leaf.empty() ? "host:" + peer.name : leaf].push_back(&peer);
    }
  }
  for (const auto& [leaf, under] : others) {
    const std::size_t take = rates.sample_per_leaf == 0 ? under.size() : std::min(rates.sample_per_leaf, under.size());
    // Round r starts where round r-1 stopped, so every peer is sampled in turn.
    const std::size_t first = static_cast<std::size_t>((round * take) % under.size());
    for (std::size_t i = 0; i < take; ++i) {
      plan.targets.push_back(Target{*under[(first + i) % under.size()], rates.across_per_s, false});
    }
  }
  double total = 0;
  for (const Target& target : plan.targets) total += target.rate_per_s;
  if (total > rates.cap_per_s && total > 0) {
    plan.scale = rates.cap_per_s / total;
    for (Target& target : plan.targets) target.rate_per_s *= plan.scale;
  }
  return plan;
}

}  // namespace rdmakit::pingmesh
