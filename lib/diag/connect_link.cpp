// The connect verdict's rules about the two ends' link settings: RoCE modes that differ (v1
// against v2) and MTUs that differ (large transfers die while small ones pass). Both need the
// agent's view of the server. The table that orders them is in lib/diag/connect_verdict.cpp.

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lib/diag/connect_facts.hpp"
#include "lib/diag/host_queries.hpp"

namespace rdmakit::diag {

// "v1", "v2" or "" from "IB/RoCE v1", "RoCE v2", ...
std::string roce_version(const std::string& mode) {
  if (mode.find("v1") != std::string::npos) return "v1";
  if (mode.find("v2") != std::string::npos) return "v2";
  return {};
}

namespace {

struct RoceModes {
  ViewPortRef client;
  ViewPortRef server;
  std::string client_mode;  // the port's default, else the GID type the attempt used
  std::string server_mode;
};

std::optional<RoceModes> differing_roce_modes(const Facts& f) {
  if (f.peer == nullptr) return std::nullopt;
  RoceModes modes{.client = f.client_port(), .server = f.peer_port(), .client_mode = {}, .server_mode = {}};
  modes.client_mode =
      modes.client.port && !modes.client.port->roce_mode.empty() ? modes.client.port->roce_mode : f.attempt.gid_type;
  if (modes.server.port != nullptr) modes.server_mode = modes.server.port->roce_mode;
  const auto client = roce_version(modes.client_mode);
  const auto server = roce_version(modes.server_mode);
  if (client.empty() || server.empty() || client == server) return std::nullopt;
  return modes;
}

std::string roce_mode_fix(const std::string& device, int port) {
  const auto folder = "/sys/kernel/config/rdma_cm/" + device;
  return fmt::format("mkdir -p {} && echo \"RoCE v2\" > {}/ports/{}/default_roce_mode", folder, folder, port);
}

std::string roce_mode_difference(const RoceModes& m) {
  return fmt::format("client {} port {}: {}; server {} port {}: {}", m.client.device ? m.client.device->name : "?",
                     m.client.port ? m.client.port->number : 0, m.client_mode, m.server.device->name,
                     m.server.port->number, m.server_mode);
}

}  // namespace

bool roce_modes_differ(const Facts& f) {
  return differing_roce_modes(f).has_value();
}

ConnectVerdict roce_mode_mismatch(const Facts& f) {
  const auto modes = differing_roce_modes(f);
  // The kernel's default is RoCE v2: the side that left it is the one to set back.
  const bool client_differs = roce_version(modes->client_mode) != "v2";
  const auto& a = f.attempt;
  std::string fix;
  if (!client_differs) {
    fix = roce_mode_fix(modes->server.device->name, modes->server.port->number);
  } else if (modes->client.port != nullptr) {
    fix = roce_mode_fix(modes->client.device->name, modes->client.port->number);
  } else if (!a.device.empty()) {
    fix = roce_mode_fix(a.device, a.device_port);
  }
  return found("roce_mode_mismatch",
               fmt::format("the two sides use different RoCE versions: client {}, server {}", modes->client_mode,
                           modes->server_mode),
               {fmt::format("client: {} port {}: default RoCE mode {}", a.device, a.device_port, modes->client_mode),
                fmt::format("server: {} port {} (serving {}): default RoCE mode {}", modes->server.device->name,
                            modes->server.port->number, a.target, modes->server_mode)},
               fix, client_differs ? "client" : "server");
}

namespace {

struct MtuPair {
  const ViewNetdev* client = nullptr;
  const ViewNetdev* server = nullptr;
  int client_active = 0;
  int server_active = 0;
  bool differ() const {
    const bool netdevs =
        client != nullptr && server != nullptr && client->mtu > 0 && server->mtu > 0 && client->mtu != server->mtu;
    return netdevs || (client_active > 0 && server_active > 0 && client_active != server_active);
  }
  std::string text() const {
    return fmt::format("client {} MTU {} (active MTU {}), server {} MTU {} (active MTU {})",
                       client ? client->name : "?", client ? client->mtu : 0, client_active,
                       server ? server->name : "?", server ? server->mtu : 0, server_active);
  }
};

MtuPair mtus(const Facts& f) {
  MtuPair pair;
  pair.client = netdev_named(f.local, f.client_netdev());
  if (const auto ref = f.client_port(); ref.port) pair.client_active = ref.port->active_mtu;
  pair.server = f.peer_owner();
  if (const auto ref = f.peer_port(); ref.port) pair.server_active = ref.port->active_mtu;
  return pair;
}

// Small transfers passed, every failed one was at least the path MTU (or 64 KiB).
bool large_transfers_die(const ConnectAttempt& a) {
  const std::size_t threshold =
      a.path_mtu > 0 ? std::min(static_cast<std::size_t>(a.path_mtu), large_transfer) : large_transfer;
  bool small_ok = false;
  bool large_failed = false;
  for (const auto& check : a.data) {
    const bool failed = check.status == StepStatus::failed || check.status == StepStatus::timeout;
    if (failed && check.bytes < threshold) return false;
    small_ok = small_ok || (check.status == StepStatus::ok && check.bytes < threshold);
    large_failed = large_failed || failed;
  }
  return small_ok && large_failed;
}

// The largest transfer that passed and the smallest that died.
std::string data_pattern(const ConnectAttempt& a) {
  const DataCheck* passed = nullptr;
  const DataCheck* died = nullptr;
  for (const auto& check : a.data) {
    if (check.status == StepStatus::ok && (passed == nullptr || check.bytes > passed->bytes)) passed = &check;
    if (check.status != StepStatus::ok && check.status != StepStatus::skipped &&
        (died == nullptr || check.bytes < died->bytes)) {
      died = &check;
    }
  }
  if (passed == nullptr || died == nullptr) return "client: data check: nothing to compare";
  return fmt::format("client: data check: {} {} passed, {} {} {}{}", passed->operation, human_bytes(passed->bytes),
                     died->operation, human_bytes(died->bytes), to_string(died->status),
                     died->detail.empty() ? "" : " (" + died->detail + ")");
}

// Without the agent the pattern alone says so; with it, only when both MTUs are known and differ.
}  // namespace

bool mtu_differs(const Facts& f) {
  if (!large_transfers_die(f.attempt)) return false;
  if (f.peer == nullptr) return true;
  const auto pair = mtus(f);
  return pair.differ() && pair.client != nullptr && pair.server != nullptr;
}

ConnectVerdict mtu_mismatch(const Facts& f) {
  std::vector<std::string> evidence{data_pattern(f.attempt)};
  if (f.peer == nullptr) {
    return found("mtu_mismatch", "large transfers die while small ones pass; the server's MTU is unknown (no agent)",
                 std::move(evidence), "", "",
                 fmt::format("run {} --serve on the server and connect to it, so that the two MTUs can be compared",
                             f.c.siblings.diag_connect()));
  }
  const auto pair = mtus(f);
  evidence.push_back(
      fmt::format("client: {} MTU {}, active MTU {}", pair.client->name, pair.client->mtu, pair.client_active));
  evidence.push_back(
      fmt::format("server: {} MTU {}, active MTU {}", pair.server->name, pair.server->mtu, pair.server_active));
  const bool client_lower = pair.client->mtu < pair.server->mtu ||
                            (pair.client->mtu == pair.server->mtu && pair.client_active < pair.server_active);
  const auto* lower_side = client_lower ? pair.client : pair.server;
  const auto* higher_side = client_lower ? pair.server : pair.client;
  return found("mtu_mismatch",
               fmt::format("large transfers die: the MTUs differ (client {} {}, server {} {})", pair.client->name,
                           pair.client->mtu, pair.server->name, pair.server->mtu),
               std::move(evidence), fmt::format("ip link set {} mtu {}", lower_side->name, higher_side->mtu),
               client_lower ? "client" : "server");
}

void add_link_warnings(const Facts& f, ConnectVerdict& v) {
  const auto add = [&v](ConnectCause cause, const std::string& text) {
    if (v.cause != cause) v.warnings.push_back(text);
  };
  if (const auto pair = mtus(f); f.peer != nullptr && pair.differ()) add("mtu_mismatch", "MTU differs: " + pair.text());
  if (const auto modes = differing_roce_modes(f)) {
    add("roce_mode_mismatch", "default RoCE mode differs: " + roce_mode_difference(*modes));
  }
}

}  // namespace rdmakit::diag
