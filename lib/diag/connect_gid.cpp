// The --gid-index rules of the connect verdict: the index another stack is given (perftest -x,
// NCCL_IB_GID_INDEX, UCX_IB_GID_INDEX), checked on both hosts, and the warnings about GID
// indexes on a connection that worked. The table that orders them: lib/diag/connect_verdict.cpp.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "lib/diag/connect_facts.hpp"
#include "lib/diag/host_queries.hpp"
#include "lib/net/ip_address.hpp"
#include "lib/rdma/gid.hpp"

namespace rdmakit::diag {

bool in_subnet(const std::string& address, const std::string& with_prefix) {
  const auto slash = with_prefix.find('/');
  if (slash == std::string::npos) return false;
  const auto subnet = Cidr::read(strip_scope(with_prefix.substr(0, slash)) + with_prefix.substr(slash));
  const auto parsed = IpAddress::parse(strip_scope(address));
  return subnet && parsed && subnet->contains(*parsed);
}

namespace {

// Some netdev of `view` has `address` in its subnet: that host reaches it on-link.
bool on_link(const HostView& view, const std::string& address) {
  return std::ranges::any_of(view.netdevs, [&address](const ViewNetdev& netdev) {
    return std::ranges::any_of(netdev.addresses,
                               [&address](const std::string& own) { return in_subnet(address, own); });
  });
}

// The path is routed: the client's route to the target has a gateway, or the target lies
// outside every subnet of the netdev the client sends from. No router forwards link-local.
struct Routing {
  bool routed = false;
  std::string evidence;
};

Routing routing(const Facts& f) {
  const auto& target = f.attempt.target;
  if (f.local.route && f.local.route->errnum == 0 && !f.local.route->gateway.empty()) {
    return {true, fmt::format("client: ip route get {}: via {} dev {}", target, f.local.route->gateway,
                              f.local.route->netdev)};
  }
  const auto* netdev = netdev_named(f.local, f.client_netdev());
  if (netdev == nullptr || netdev->addresses.empty() ||
      std::ranges::any_of(netdev->addresses, [&target](const std::string& own) { return in_subnet(target, own); })) {
    return {};
  }
  return {true,
          fmt::format("client: {} is outside every subnet of {} ({})", target, netdev->name, join(netdev->addresses))};
}

// One host's end of the path as a stack given the index sees it.
struct GidSide {
  std::string name;               // "client", "server"
  GidPort port;                   // the port on the path; no device when unknown
  GidAdvice advice;               // the entry for this host's address on the path
  std::optional<GidEntry> entry;  // entry N of the port, none when empty
  std::string problem;            // what is wrong with N here, "" when nothing
};

GidSide gid_side(std::string name, const HostView& view, const ViewPortRef& ref, const std::string& address,
                 std::uint32_t index) {
  GidSide side{
      .name = std::move(name), .port = {}, .advice = advise_gid(gid_ports(view), address), .entry = {}, .problem = {}};
  if (ref.device != nullptr && ref.port != nullptr) {
    side.port = GidPort{.device = ref.device->name, .port = ref.port->number, .gids = ref.port->gids};
  }
  const auto found = std::ranges::find_if(side.port.gids, [index](const GidEntry& e) { return e.index == index; });
  if (found != side.port.gids.end()) side.entry = *found;
  return side;
}

// What is wrong with index N at `side` beyond lib/core's index_problem: another address than
// the path's, which the other host does not reach on-link (a RoCE v2 packet to it needs a
// route the other host may not have). Unknown (no agent) counts as nothing wrong.
std::string address_problem(const GidSide& side, std::uint32_t index, const HostView* other) {
  if (!side.entry || !side.advice.entry || other == nullptr) return {};
  const auto address = entry_address(*side.entry);
  if (canonical(side.entry->gid) == canonical(side.advice.entry->gid) || on_link(*other, address)) return {};
  return fmt::format("index {} holds {}, not {}, and {} is in no subnet of the {}", index, side.entry->gid,
                     side.advice.address, address, side.name == "client" ? "server" : "client");
}

// On one link both ends may use their link-local entries, when both are that and of one type.
bool link_local_pair(const GidSide& side, const GidSide* other) {
  return other != nullptr && side.entry && other->entry && is_link_local(*side.entry) && is_link_local(*other->entry) &&
         side.entry->type == other->entry->type;
}

struct GidCheck {
  std::uint32_t index = 0;
  Routing routing;
  GidSide client;
  std::optional<GidSide> server;  // with the agent only
  bool link_local_fails() const {
    const auto link_local = [](const GidSide& side) { return side.entry && is_link_local(*side.entry); };
    return routing.routed && (link_local(client) || (server && link_local(*server)));
  }
  bool mismatched() const { return !client.problem.empty() || (server && !server->problem.empty()); }
};

void judge(GidSide& side, const GidSide* other, std::uint32_t index, bool routed, const HostView* other_view) {
  // An unknown port is no verdict: the evidence says it is unknown.
  if (side.port.device.empty()) return;
  if (!routed && side.entry && is_link_local(*side.entry) && (other == nullptr || link_local_pair(side, other))) return;
  side.problem = index_problem(side.port, index, side.advice);
  if (side.problem.empty()) side.problem = address_problem(side, index, other_view);
}

GidCheck gid_check(const Facts& f, std::uint32_t index) {
  GidCheck check{.index = index,
                 .routing = routing(f),
                 .client = gid_side("client", f.local, f.client_port(), f.attempt.source_address, index),
                 .server = std::nullopt};
  if (f.peer != nullptr) check.server = gid_side("server", f.peer->view, f.peer_port(), f.attempt.target, index);
  const auto* server = check.server ? &*check.server : nullptr;
  const auto* peer_view = f.peer != nullptr ? &f.peer->view : nullptr;
  judge(check.client, server, index, check.routing.routed, peer_view);
  if (check.server) judge(*check.server, &check.client, index, check.routing.routed, &f.local);
  return check;
}

std::optional<GidCheck> asked_gid_check(const Facts& f) {
  if (!f.attempt.gid_index || !worked(f)) return std::nullopt;
  return gid_check(f, *f.attempt.gid_index);
}

std::string side_entry_text(const GidSide& side, std::uint32_t index) {
  if (side.port.device.empty()) return fmt::format("{}: index {}: the port on the path is unknown", side.name, index);
  return fmt::format("{}: {} port {} index {}: {}{}", side.name, side.port.device, side.port.port, index,
                     side.entry ? entry_text(*side.entry) : "empty",
                     side.problem.empty() ? "" : " (" + side.problem + ")");
}

std::string advice_text(const GidSide& side) {
  if (!side.advice.entry) return fmt::format("{}: {}", side.name, side.advice.reason);
  return fmt::format("{}: the entry for {}: {} on {} port {}", side.name, side.advice.address,
                     entry_text(*side.advice.entry), side.advice.device, side.advice.port);
}

// The settings of the stacks the option names, from lib/core's list: "perftest -d rxe1 -i 1 -x 3, NCCL ...".
std::string settings_text(const GidAdvice& advice) {
  std::vector<std::string> items;
  for (const auto& setting : stack_settings(advice)) {
    if (setting.stack == "perftest" || setting.stack == "NCCL" || setting.stack == "UCX") {
      items.push_back(setting.stack + " " + setting.setting);
    }
  }
  return join(items, ", ");
}

struct GidRemedy {
  std::string fix;
  std::string fix_host;
  std::string next;
};

// The index each host should be given. One index fits both hosts only when their advised
// entries share it: then setting it is the fix, on both; else each host needs its own.
GidRemedy gid_remedy(const GidCheck& check, const std::string& target, const SiblingNames& siblings) {
  const auto& client = check.client.advice;
  if (!client.entry)
    return {{}, {}, fmt::format("{}; give the client's stacks an index that holds its address", client.reason)};
  if (!check.server) {
    return {{},
            {},
            fmt::format("client: {}; the server's index is unknown (no agent): run {} --serve on the "
                        "server and connect to it with --gid-index {}",
                        settings_text(client), siblings.diag_connect(), client.entry->index)};
  }
  const auto& server = check.server->advice;
  if (!server.entry) return {{}, {}, fmt::format("server: {}", server.reason)};
  const auto c = client.entry->index;
  const auto s = server.entry->index;
  if (c == s) {
    return {fmt::format("export NCCL_IB_GID_INDEX={} UCX_IB_GID_INDEX={}", c, c), "both",
            fmt::format("perftest -x {} and Open MPI --mca btl_openib_gid_index {} on both hosts; to check: "
                        "{} {} --gid-index {}",
                        c, c, siblings.diag_connect(), target, c)};
  }
  return {{},
          {},
          fmt::format("one index for both hosts cannot be right: give each its own (perftest -x {} on the client, "
                      "-x {} on the server); client: {}; server: {}",
                      c, s, settings_text(client), settings_text(server))};
}

ConnectVerdict gid_verdict(ConnectCause cause, const std::string& summary, const GidCheck& check, const Facts& f,
                           std::vector<std::string> evidence) {
  evidence.push_back(side_entry_text(check.client, check.index));
  evidence.push_back(check.server ? side_entry_text(*check.server, check.index)
                                  : fmt::format("server: index {}: unknown, {}", check.index,
                                                agent_text(f.c.agent).substr(std::string_view("client: ").size())));
  evidence.push_back(advice_text(check.client));
  if (check.server) evidence.push_back(advice_text(*check.server));
  evidence.push_back("client: " + step_text(*f.connect) +
                     ": rdma_cm takes the GID from the address, so its own connection works whatever the index");
  auto remedy = gid_remedy(check, f.attempt.target, f.c.siblings);
  return found(cause, summary, std::move(evidence), std::move(remedy.fix), std::move(remedy.fix_host),
               std::move(remedy.next));
}

}  // namespace

bool gid_index_link_local(const Facts& f) {
  const auto check = asked_gid_check(f);
  return check && check->link_local_fails();
}

bool gid_index_differs(const Facts& f) {
  const auto check = asked_gid_check(f);
  return check && check->mismatched();
}

ConnectVerdict gid_link_local_verdict(const Facts& f) {
  const auto check = *asked_gid_check(f);
  std::vector<std::string> sides;
  for (const auto* side : {&check.client, check.server ? &*check.server : nullptr}) {
    if (side != nullptr && side->entry && is_link_local(*side->entry)) sides.push_back(side->name);
  }
  return gid_verdict(
      "gid_link_local",
      fmt::format("GID index {} is link-local on the {} and the path to {} is routed: a stack given index {} "
                  "cannot reach the server, though rdma_cm connected",
                  check.index, join(sides, " and the "), f.attempt.target, check.index),
      check, f, {check.routing.evidence});
}

ConnectVerdict gid_index_mismatch_verdict(const Facts& f) {
  const auto check = *asked_gid_check(f);
  std::vector<std::string> wrong;
  for (const auto* side : {&check.client, check.server ? &*check.server : nullptr}) {
    if (side != nullptr && !side->problem.empty())
      wrong.push_back(fmt::format("on the {}, {}", side->name, side->problem));
  }
  auto v = gid_verdict("gid_index_mismatch",
                       fmt::format("GID index {} does not fit both hosts: {}; a stack given index {} on both fails, "
                                   "though rdma_cm connected",
                                   check.index, join(wrong, "; "), check.index),
                       check, f, {});
  if (!check.server && v.next.find("--serve") == std::string::npos) {
    v.next += fmt::format("; the server's index is unknown: run {} --serve on the server and connect to it",
                          f.c.siblings.diag_connect());
  }
  return v;
}

// Without --gid-index, on a connection that worked: what a stack left at its default would meet.
void add_gid_warnings(const Facts& f, ConnectVerdict& v) {
  if (v.cause != "ok") return;
  if (f.attempt.gid_index) {
    if (f.peer == nullptr) {
      v.warnings.push_back(
          fmt::format("GID index {} was checked on the client only: the server's entry is unknown "
                      "without the agent ({} --serve on the server)",
                      *f.attempt.gid_index, f.c.siblings.diag_connect()));
    }
    return;
  }
  const auto check = gid_check(f, 0);
  const auto& client = check.client.advice.entry;
  if (check.server && client && check.server->advice.entry && client->index != check.server->advice.entry->index) {
    v.warnings.push_back(
        fmt::format("one NCCL_IB_GID_INDEX for both hosts cannot be right: client {}, server {} (perftest -x, "
                    "UCX_IB_GID_INDEX likewise)",
                    client->index, check.server->advice.entry->index));
  }
  if (check.link_local_fails()) {
    v.warnings.push_back(
        fmt::format("the path is routed and GID index 0 is link-local ({}): stacks left at index 0 "
                    "fail across the router",
                    check.routing.evidence));
  }
}

}  // namespace rdmakit::diag
