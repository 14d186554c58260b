#pragma once
// The options every tool shares (--json, --timeout, --debug, --log-level) and those of every
// tool that serves clients (-P, --accept-timeout and who it serves).

#include <chrono>
#include <optional>
#include <string>

#include "lib/base/cli_declarations.hpp"
#include "lib/net/peer_gate.hpp"

namespace rdmakit {

struct CommonOptions {
  bool json = false;
  double timeout_s = 5.0;  // bound on every wait for the peer or the fabric
  bool debug = false;
  std::string log_level = "warn";

  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000.0));
  }
  // Adds --json, --timeout, --log-level; `debug_flag` ("-d" or "") names the short debug flag.
  void add_to(CLI::App& app, const std::string& debug_flag = "-d");
  // Throws UsageError when the values are out of range.
  void check() const;
};

// The gate of a server whose every connection is a client of its own (rping, rdma_server):
// --max-per-peer as well, so that one host cannot take every slot.
inline constexpr GateFlags per_client_gate{.local_default = false, .cap = true, .rate = true, .per_peer = true};

// The flags of a tool that serves clients, spelled as stock rping spells them:
// -P/--persistent and --accept-timeout, and who it serves (--allow, --max-clients,
// --peer-rate, and where the tool takes it --max-per-peer: any peer by default, as the stock
// servers do, at most 64 at once). Where the server listens stays each tool's own flag
// (rping -a, rdma_server -s, send_bw --bind), as their stock namesakes have it.
struct ServerOptions {
  bool persistent = false;
  double accept_timeout_s = 0;  // 0: wait forever
  GateOptions peers{.allow = {}, .max_clients = 64, .peer_rate = 0, .max_per_peer = {}};
  GateFlags gate;  // which of the gate's flags this tool offers (add_to's)

  // `persistent_help` and `accept_timeout_help` say what the two flags do in this tool.
  void add_to(CLI::App& app, const std::string& persistent_help, const std::string& accept_timeout_help,
              GateFlags flags = {});
  // The gate of this server listening on `bind`.
  GateLimits gate_limits(const std::string& bind) const { return peers.limits(bind, gate); }
  // The wait for a client, none for 0.
  std::optional<std::chrono::milliseconds> accept_timeout() const;
};

}  // namespace rdmakit
