#include "lib/net/peer_gate.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "lib/base/described_json.hpp"
#include "lib/base/error.hpp"

namespace rdmakit {

namespace {

unsigned prefix_of_mask(const sockaddr* mask) {
  if (mask == nullptr) return 0;
  const auto bits = [](const std::uint8_t* bytes, std::size_t size) {
    unsigned count = 0;
    for (std::size_t i = 0; i < size; ++i) count += static_cast<unsigned>(std::popcount(bytes[i]));
    return count;
  };
  if (mask->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(mask);
    return bits(reinterpret_cast<const std::uint8_t*>(&v4->sin_addr), 4);
  }
  if (mask->sa_family == AF_INET6) {
    return bits(reinterpret_cast<const sockaddr_in6*>(mask)->sin6_addr.s6_addr, 16);
  }
  return 0;
}

std::uint16_t port_of(const sockaddr* address) {
  if (address->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(address)->sin_port);
  if (address->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(address)->sin6_port);
  return 0;
}

// Spaces only, as an allow list is written ("10.0.0.0/8, 10.1.0.0/16"): a tab stays an error.
std::string_view without_spaces(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

}  // namespace

AllowList AllowList::parse(const std::vector<std::string>& values, std::string_view flag) {
  std::vector<Cidr> cidrs;
  for (const auto& value : values) {
    std::string_view rest = value;
    for (;;) {
      const auto comma = rest.find(',');
      const auto item = without_spaces(rest.substr(0, comma));
      if (item.empty()) throw UsageError(fmt::format("{} '{}': an empty entry", flag, value));
      cidrs.push_back(Cidr::parse(item, flag));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return AllowList(std::move(cidrs));
}

bool AllowList::allows(const IpAddress& address) const {
  return any() || std::any_of(cidrs_.begin(), cidrs_.end(), [&](const Cidr& c) { return c.contains(address); });
}

std::string AllowList::to_string() const {
  if (any()) return "any address";
  std::string text;
  for (const auto& cidr : cidrs_) text += (text.empty() ? "" : ", ") + cidr.to_string();
  return text;
}

std::vector<InterfaceAddress> interface_addresses() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  std::vector<InterfaceAddress> found;
  for (const auto* entry = list; entry != nullptr; entry = entry->ifa_next) {
    const auto address = IpAddress::of(entry->ifa_addr);
    if (!address) continue;
    found.push_back({.netdev = entry->ifa_name, .address = *address, .prefix = prefix_of_mask(entry->ifa_netmask)});
  }
  freeifaddrs(list);
  return found;
}

AllowList local_subnets(const std::string& bind, const std::vector<InterfaceAddress>& interfaces) {
  const auto bound = bind.empty() ? std::nullopt : IpAddress::parse(bind);
  const bool wildcard = bind.empty() || (bound && bound->is_wildcard());
  std::string netdev;
  if (!wildcard && bound) {
    const auto holder = std::find_if(interfaces.begin(), interfaces.end(),
                                     [&](const InterfaceAddress& entry) { return entry.address == *bound; });
    if (holder == interfaces.end()) return AllowList({Cidr(*bound, static_cast<unsigned>(bound->size() * 8))});
    netdev = holder->netdev;
  }
  std::vector<Cidr> subnets;
  for (const auto& entry : interfaces) {
    if (!wildcard && (entry.netdev != netdev || !bound || entry.address.family != bound->family)) continue;
    // No netmask (a point-to-point link, some tunnels) reads as prefix 0: the address alone,
    // never every address there is.
    const auto prefix = entry.prefix == 0 ? static_cast<unsigned>(entry.address.size() * 8) : entry.prefix;
    const Cidr subnet(entry.address, prefix);
    if (std::find(subnets.begin(), subnets.end(), subnet) == subnets.end()) subnets.push_back(subnet);
  }
  return AllowList(std::move(subnets));
}

namespace {

// The tally as the report has it, with its total.
struct RefusedRecord {
  std::uint64_t total = 0;
  std::uint64_t not_allowed = 0;
  std::uint64_t too_fast = 0;
  std::uint64_t too_many = 0;
};

struct RefusedJson {
  static constexpr described::ReadLimits limits{};
  static constexpr auto missing_keys = described::MissingKeys::refused;
  static void members(described::Describes<RefusedRecord> auto& refused, auto&& visit) {
    visit("total", refused.total);
    visit("not_allowed", refused.not_allowed);
    visit("too_fast", refused.too_fast);
    visit("too_many", refused.too_many);
  }
};

}  // namespace

void RefusedPeers::add_to(nlohmann::json& document) const {
  document["refused_peers"] = described::write<RefusedJson>(RefusedRecord{.total = tally_.total(),
                                                                          .not_allowed = tally_.not_allowed,
                                                                          .too_fast = tally_.too_fast,
                                                                          .too_many = tally_.too_many});
}

std::vector<described::SchemaShape> refused_peers_shapes() {
  return {{.schema = "common",
           .pointer = "/$defs/refused_peers",
           .shape = described::shape<RefusedJson, RefusedRecord>(),
           .extra_keys = {}}};
}

std::string RefusedPeers::note() const {
  if (tally_.total() == 0) return {};
  return fmt::format("refused {} connections: {} not in --allow, {} over --peer-rate, {} over --max-clients\n",
                     tally_.total(), tally_.not_allowed, tally_.too_fast, tally_.too_many);
}

struct PeerGate::State {
  GateLimits limits;
  mutable std::mutex mutex;
  std::size_t held = 0;
  // The slots held per peer, only while it holds one: no more entries than slots held.
  std::map<PeerKey, std::size_t> held_by_peer;
  RefusedTally refused;
  // Refusals are logged from a bucket of refusal_log_burst lines that refills one line a
  // refusal_log_interval; the rest are counted into the next line: a flood of them costs a
  // counter each, not a line each.
  double log_tokens = refusal_log_burst;
  std::optional<std::chrono::steady_clock::time_point> last_refill;
  std::uint64_t unlogged = 0;

  bool may_log(std::chrono::steady_clock::time_point now) {
    if (last_refill) {
      const std::chrono::duration<double> since = now - *last_refill;
      log_tokens = std::min(refusal_log_burst, log_tokens + since / refusal_log_interval);
    }
    last_refill = now;
    if (log_tokens < 1) return false;
    log_tokens -= 1;
    return true;
  }
  // Per peer: its latest new connections, at most limits.peer_rate of them.
  std::map<PeerKey, std::deque<std::chrono::steady_clock::time_point>> recent;

  // Forgets the peers with nothing in the window, then, still full, the one heard from
  // longest ago.
  void make_room(std::chrono::steady_clock::time_point now) {
    if (recent.size() < limits.tracked) return;
    std::erase_if(recent, [&](const auto& entry) { return now - entry.second.back() >= peer_rate_window; });
    if (recent.size() < limits.tracked) return;
    const auto quietest = std::min_element(
        recent.begin(), recent.end(), [](const auto& a, const auto& b) { return a.second.back() < b.second.back(); });
    recent.erase(quietest);
  }

  // Records a new connection from `address`; false when it makes more than peer_rate in
  // the window.
  bool within_rate(const IpAddress& address, std::chrono::steady_clock::time_point now) {
    if (limits.peer_rate == 0) return true;
    const auto key = std::make_pair(address.family, address.bytes);
    auto found = recent.find(key);
    if (found == recent.end()) {
      make_room(now);
      found = recent.emplace(key, std::deque<std::chrono::steady_clock::time_point>{}).first;
    }
    auto& times = found->second;
    while (!times.empty() && now - times.front() >= peer_rate_window) times.pop_front();
    const bool within = times.size() < limits.peer_rate;
    times.push_back(now);
    if (times.size() > limits.peer_rate) times.pop_front();
    return within;
  }
};

PeerGate::PeerGate(GateLimits limits) : state_(std::make_shared<State>()) {
  state_->limits = std::move(limits);
}

PeerGate::Slot& PeerGate::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    release();
    state_ = std::move(other.state_);
    peer_ = other.peer_;
  }
  return *this;
}

PeerGate::Slot::~Slot() {
  release();
}

void PeerGate::Slot::release() noexcept {
  if (!state_) return;
  const std::lock_guard lock(state_->mutex);
  --state_->held;
  if (const auto found = state_->held_by_peer.find(peer_);
      found != state_->held_by_peer.end() && --found->second == 0) {
    state_->held_by_peer.erase(found);
  }
  state_.reset();
}

PeerGate::Admission PeerGate::admit(const sockaddr* peer, std::chrono::steady_clock::time_point now) {
  const auto address = IpAddress::of(peer);
  Admission admission;
  std::uint64_t unlogged = 0;
  {
    const std::lock_guard lock(state_->mutex);
    const auto& limits = state_->limits;
    if (!address || !limits.allow.allows(*address)) {
      admission.refused = RefusalCause::not_allowed;
      admission.reason = fmt::format("not in {} {}", limits.allow_flag, limits.allow.to_string());
      ++state_->refused.not_allowed;
    } else if (!state_->within_rate(*address, now)) {
      admission.refused = RefusalCause::too_fast;
      admission.reason =
          fmt::format("more than {} new connections from it in {} s", limits.peer_rate, peer_rate_window.count());
      ++state_->refused.too_fast;
    } else if (limits.max_clients != 0 && state_->held >= limits.max_clients) {
      admission.refused = RefusalCause::too_many;
      admission.reason = fmt::format("already serving {} clients", state_->held);
      ++state_->refused.too_many;
    } else if (const auto key = PeerKey(address->family, address->bytes);
               limits.max_per_peer != 0 && state_->held_by_peer[key] >= limits.max_per_peer) {
      admission.refused = RefusalCause::too_many;
      admission.reason = fmt::format("already serving {} connections from it", state_->held_by_peer[key]);
      ++state_->refused.too_many;
    } else {
      ++state_->held;
      ++state_->held_by_peer[key];
      admission.slot = Slot(state_, key);
      return admission;
    }
    if (!state_->may_log(now)) {
      ++state_->unlogged;
      return admission;
    }
    unlogged = std::exchange(state_->unlogged, 0);
  }
  spdlog::warn("refused {} port {}: {}{}", address ? address->to_string() : std::string("an unknown address"),
               port_of(peer), admission.reason,
               unlogged == 0 ? std::string() : fmt::format(" ({} more refused before it, not logged)", unlogged));
  return admission;
}

RefusedTally PeerGate::refused() const {
  const std::lock_guard lock(state_->mutex);
  return state_->refused;
}

std::size_t PeerGate::held() const {
  const std::lock_guard lock(state_->mutex);
  return state_->held;
}

std::size_t PeerGate::held_from(const IpAddress& address) const {
  const std::lock_guard lock(state_->mutex);
  const auto found = state_->held_by_peer.find(PeerKey(address.family, address.bytes));
  return found == state_->held_by_peer.end() ? 0 : found->second;
}

const GateLimits& PeerGate::limits() const {
  return state_->limits;
}

RefusalsToReport::~RefusalsToReport() {
  try {
    report_.add(RefusedPeers(gate_->refused()));
  } catch (const std::exception& error) {
    spdlog::warn("the refused peers could not be reported: {}", error.what());
  }
}

void GateOptions::add_to(CLI::App& app, GateFlags flags) {
  // The tools whose server is a mode of their own (diag-connect --serve, rdma_smoke --serve)
  // name that mode; the rest name the server side, as their other server flags do.
  const std::string side = flags.local_default ? "--serve: " : "Server: ";
  app.add_option("--allow", allow,
                 flags.local_default
                     ? "Answer only peers in these networks (CIDR[,CIDR...], repeatable); default: the local "
                       "subnets of the listening address"
                     : "Answer only peers in these networks (CIDR[,CIDR...], repeatable); default: any peer")
      ->type_name("CIDR[,CIDR...]")
      ->allow_extra_args(false)
      ->delimiter(',')
      ->check(CLI::Validator(
          [](const std::string& value) {
            try {
              (void)AllowList::parse({value}, "");
              return std::string();
            } catch (const UsageError& bad) {
              return std::string(without_spaces(bad.what()));  // CLI11 names the flag
            }
          },
          ""));
  if (flags.cap) {
    app.add_option("--max-clients", max_clients, side + "refuse a client while this many are served (0: no cap)")
        ->capture_default_str();
  }
  if (flags.cap && flags.per_peer) {
    app.add_option("--max-per-peer", max_per_peer,
                   side +
                       "refuse a client while this many from its address are served (0: no cap); default: half "
                       "of --max-clients");
  }
  if (flags.rate) {
    app.add_option("--peer-rate", peer_rate,
                   fmt::format("{}refuse a peer's new connections beyond this many in {} s (0: no limit)", side,
                               peer_rate_window.count()))
        ->capture_default_str();
  }
}

GateLimits GateOptions::limits(const std::string& bind, GateFlags flags) const {
  GateLimits limits;
  limits.allow = AllowList::parse(allow, "--allow");
  if (allow.empty() && flags.local_default) limits.allow = local_subnets(bind, interface_addresses());
  limits.max_clients = flags.cap ? max_clients : 0;
  limits.max_per_peer = flags.cap && flags.per_peer ? max_per_peer.value_or((max_clients + 1) / 2) : 0;
  limits.peer_rate = flags.rate ? peer_rate : 0;
  return limits;
}

std::string answering_line(const AllowList& allow) {
  return fmt::format("answering only {} (--allow to widen)", allow.to_string());
}

}  // namespace rdmakit
