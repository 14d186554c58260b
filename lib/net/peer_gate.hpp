#pragma once
// Who a listener answers: the allow list (--allow CIDR,...), a per-peer rate of new
// connections and a cap on the connections held at once. Every listener asks one PeerGate
// before it serves a peer (Listener::next_request, SyncEndpoint::get_request, the connection
// groups, the diag-connect agent, rdma_smoke --serve); the gate logs each refusal in one
// line and counts it for the report's "refused_peers".

#include <sys/socket.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lib/base/cli_declarations.hpp"
#include "lib/base/described_json.hpp"
#include "lib/base/report.hpp"
#include "lib/net/ip_address.hpp"

namespace rdmakit {

// The networks a listener answers; empty: every address.
class AllowList {
 public:
  AllowList() = default;
  explicit AllowList(std::vector<Cidr> cidrs) : cidrs_(std::move(cidrs)) {}
  // Each value a comma-separated list of CIDRs (the flag repeated); throws UsageError.
  static AllowList parse(const std::vector<std::string>& values, std::string_view flag);
  bool any() const { return cidrs_.empty(); }
  bool allows(const IpAddress& address) const;
  const std::vector<Cidr>& cidrs() const { return cidrs_; }
  // "10.0.0.0/24, 127.0.0.0/8", or "any address".
  std::string to_string() const;

 private:
  std::vector<Cidr> cidrs_;
};

// One address of a network interface, as getifaddrs lists it.
struct InterfaceAddress {
  std::string netdev;
  IpAddress address;
  unsigned prefix = 0;
};

// This host's interface addresses (getifaddrs); empty when it cannot tell.
std::vector<InterfaceAddress> interface_addresses();

// The subnets a listener bound to `bind` answers by default: for a wildcard ("", "::",
// "0.0.0.0") every interface's subnets, loopback's included; else the subnets of the
// interface that holds `bind` in its family, or `bind` alone when no interface holds it.
AllowList local_subnets(const std::string& bind, const std::vector<InterfaceAddress>& interfaces);

enum class RefusalCause { not_allowed, too_fast, too_many };

// The refusals of a run, by cause: the report's "refused_peers".
struct RefusedTally {
  std::uint64_t not_allowed = 0;  // outside --allow
  std::uint64_t too_fast = 0;     // over --peer-rate
  std::uint64_t too_many = 0;     // over --max-clients
  std::uint64_t total() const { return not_allowed + too_fast + too_many; }
};

// The report's "refused_peers" section (JSON always; a text line only when a peer was refused).
class RefusedPeers final : public ReportSection {
 public:
  explicit RefusedPeers(RefusedTally tally) : tally_(tally) {}
  void add_to(nlohmann::json& document) const override;
  std::string note() const override;

 private:
  RefusedTally tally_;
};

// The "refused_peers" section's shape and its schema definition (tests/unit/described_json_test.cpp).
std::vector<described::SchemaShape> refused_peers_shapes();

// Refusals logged: a burst of this many lines, then one a refusal_log_interval; those between
// are counted into the next line.
inline constexpr double refusal_log_burst = 10;
inline constexpr std::chrono::seconds refusal_log_interval{1};
// The window --peer-rate counts new connections in.
inline constexpr std::chrono::seconds peer_rate_window{10};
// How many peers the rate limit remembers: a spray of source addresses evicts the quietest
// instead of growing the table.
inline constexpr std::size_t tracked_peers = 4096;

struct GateLimits {
  AllowList allow;               // empty: any peer
  std::size_t max_clients = 0;   // connections held at once; 0: no cap
  std::size_t max_per_peer = 0;  // of those, from one address at once; 0: no cap
  std::size_t peer_rate = 0;     // new connections per peer in peer_rate_window; 0: no limit
  std::size_t tracked = tracked_peers;
  std::string allow_flag = "--allow";  // the flag a refusal names (rdma_pingmesh: --metrics-allow)
};

// Decides, for each new connection, whether the listener serves it. Thread-safe: a
// persistent server's connections release their slots from their own threads.
class PeerGate {
  struct State;

 public:
  explicit PeerGate(GateLimits limits);

  // The key a peer's address has in the gate's tables.
  using PeerKey = std::pair<int, std::array<std::uint8_t, 16>>;

  // Holds one of max_clients (and of the peer's max_per_peer) until destroyed (or moved from).
  class Slot {
   public:
    Slot() = default;
    Slot(std::shared_ptr<State> state, PeerKey peer) : state_(std::move(state)), peer_(peer) {}
    Slot(Slot&& other) noexcept = default;
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot();

   private:
    void release() noexcept;
    std::shared_ptr<State> state_;
    PeerKey peer_;
  };

  struct Admission {
    std::optional<RefusalCause> refused;
    std::string reason;  // why refused, "" when admitted
    Slot slot;
    bool admitted() const { return !refused; }
  };

  // Admits `peer` at `now` or refuses it, logging one line ("refused 10.99.0.1 port 4000:
  // not in --allow 10.0.0.0/24") and counting it.
  Admission admit(const sockaddr* peer, std::chrono::steady_clock::time_point now);
  RefusedTally refused() const;
  std::size_t held() const;
  // Of those, from `address`.
  std::size_t held_from(const IpAddress& address) const;
  const GateLimits& limits() const;

 private:
  std::shared_ptr<State> state_;
};

// Adds the gate's refusals to `report` ("refused_peers") when it goes, however the serving ended.
class RefusalsToReport {
 public:
  RefusalsToReport(std::shared_ptr<const PeerGate> gate, Report& report) : gate_(std::move(gate)), report_(report) {}
  RefusalsToReport(const RefusalsToReport&) = delete;
  RefusalsToReport& operator=(const RefusalsToReport&) = delete;
  ~RefusalsToReport();

 private:
  std::shared_ptr<const PeerGate> gate_;
  Report& report_;
};

// Which of the gate's flags a listener takes, and its default allow list.
struct GateFlags {
  bool local_default = false;  // no --allow: the listening address's local subnets (else any peer)
  bool cap = true;             // --max-clients (a connection group's -c is its own cap)
  bool rate = true;            // --peer-rate
  // --max-per-peer (with cap): connections from one address at once, by default half of
  // --max-clients, so that one host cannot hold every slot. Not for a server whose one client
  // opens its connections from one address (send_bw's queue pairs).
  bool per_peer = false;
};

// The flags that set a listener's gate: --allow, --max-clients, --max-per-peer, --peer-rate.
// Each tool adds them once through ServerOptions (rping, rdma_server, send_bw),
// ConnectionFlags (ucmatose, udaddy) or on its own (the agent, rdma_smoke --serve), setting
// its defaults first.
struct GateOptions {
  std::vector<std::string> allow;  // as given; empty: the tool's default
  std::size_t max_clients = 0;
  std::size_t peer_rate = 0;
  std::optional<std::size_t> max_per_peer;  // nullopt: half of max_clients (rounded up)

  // A bad CIDR is a usage error when the command line is parsed.
  void add_to(CLI::App& app, GateFlags flags);
  // The gate of a listener bound to `bind` ("" or a wildcard: every address); with
  // `flags.local_default` and no --allow, the listening address's local subnets.
  GateLimits limits(const std::string& bind, GateFlags flags) const;
};

// The line a listener with a local default says at start: "answering only 10.0.0.0/24,
// 127.0.0.0/8 (--allow to widen)".
std::string answering_line(const AllowList& allow);

}  // namespace rdmakit
