#include "lib/send_bw/gid_index_check.hpp"

#include <algorithm>
#include <ranges>

#include <fmt/format.h>

namespace rdmakit {

namespace {

const GidEntry* entry_at(const GidPort& port, std::uint32_t index) {
  const auto found = std::ranges::find_if(port.gids, [index](const GidEntry& entry) { return entry.index == index; });
  return found == port.gids.end() ? nullptr : &*found;
}

bool is_ipv4(const GidEntry& entry) {
  return !ipv4_of(entry).empty();
}

// The family of a numeric peer address: true for IPv4, false for IPv6, none for a name.
std::optional<bool> peer_is_ipv4(const std::string& peer) {
  const auto gid = gid_for_address(peer);
  if (!ipv4_of(GidEntry{.index = 0, .gid = gid, .type = {}, .netdev = {}}).empty()) return true;
  if (gid.find(':') != std::string::npos) return false;
  return std::nullopt;
}

}  // namespace

std::optional<GidEntry> routable_gid(const GidPort& port, std::uint32_t index, const std::string& peer) {
  const auto* given = entry_at(port, index);
  const auto want_ipv4 = peer_is_ipv4(peer);
  // Lower is better: the given entry's own address, then the peer's family, then the index.
  auto rank = [&](const GidEntry& entry) {
    if (given != nullptr && canonical(entry.gid) == canonical(given->gid)) return 0;
    if (want_ipv4 && is_ipv4(entry) == *want_ipv4) return 1;
    return 2;
  };
  const GidEntry* best = nullptr;
  for (const auto& entry : port.gids) {
    if (entry.type != "RoCE v2" || is_link_local(entry)) continue;
    if (given != nullptr && entry.netdev != given->netdev) continue;
    if (best == nullptr || rank(entry) < rank(*best)) best = &entry;
  }
  if (best == nullptr) return std::nullopt;
  return *best;
}

std::string routable_gid_advice(const GidPort& port, std::uint32_t index, const std::string& peer) {
  if (const auto entry = routable_gid(port, index, peer)) {
    return fmt::format("-x {} ({} {}) is this host's routable entry{}", entry->index, entry->gid, entry->type,
                       entry->netdev.empty() ? "" : " on " + entry->netdev);
  }
  const auto* given = entry_at(port, index);
  const bool on_netdev = given != nullptr && !given->netdev.empty();
  return fmt::format("{} port {} has no routable RoCE v2 entry{} (no IP address there?)", port.device, port.port,
                     on_netdev ? " on " + given->netdev : "");
}

std::optional<std::string> gid_index_warning(const GidPort& port, std::uint32_t index, const std::string& peer) {
  const auto* given = entry_at(port, index);
  if (given == nullptr || given->type == "IB") return std::nullopt;
  const auto better = routable_gid(port, index, peer);
  const bool worse_type = given->type == "RoCE v1" && better.has_value();
  if (!is_link_local(*given) && !worse_type) return std::nullopt;
  // index_problem words what the entry is; an advice without an entry still names it.
  GidAdvice advice{.address = {}, .device = port.device, .port = port.port, .entry = better, .reason = {}};
  const auto problem = index_problem(port, index, advice);
  if (problem.empty()) return std::nullopt;
  return fmt::format("-x {}: {}; {}", index, problem, routable_gid_advice(port, index, peer));
}

}  // namespace rdmakit
