// The connect verdict: the rules that name why a client could not talk to a server over
// rdma_cm, tried in the order below; the first that fits wins.
//
// clang-format off
// | code                    | exit | the facts that name it                                                          |
// |-------------------------|------|---------------------------------------------------------------------------------|
// | gid_link_local          | 1    | --gid-index N, the rest ok: entry N link-local on a side while the path routes |
// | gid_index_mismatch      | 1    | --gid-index N, the rest ok: entry N is not the path's kind on one side         |
// | ok                      | 0    | resolve_addr, resolve_route, connect ok and no data check failed               |
// | source_not_rdma         | 1    | the client's source netdev has no RDMA device; resolve_addr ENODEV/EADDRNOTAVAIL |
// | no_subnet_manager       | 1    | an IB port on either side is not ACTIVE and has LID 0 or SM LID 0              |
// | pkey_mismatch           | 1    | IPoIB: a port is no member of its netdev's partition, the two partitions       |
// |                         |      | differ, or both ports are limited members                                      |
// | no_route                | 1    | the route (or resolve_addr) ends in ENETUNREACH/EHOSTUNREACH (a down netdev   |
// |                         |      | holding the target's subnet named, with its fix)                               |
// | neighbour_unresolved    | 1    | resolve_addr timed out / ADDR_ERROR, the neighbour INCOMPLETE/FAILED/none      |
// | no_path_record          | 1    | IB: resolve_route failed (the subnet administrator's path record query)        |
// | neighbour_wrong         | 1    | a static neighbour, connect unanswered, the agent silent or its MAC another    |
// | wrong_port_space        | 1    | REJ reason 8 and the server listens on the port in another port space          |
// | no_listener             | 1    | REJ reason 8 and nothing listens there (without the agent: the REJ alone)      |
// | rejected_by_application | 1    | a consumer REJ (reason 28), with its private data                              |
// | peer_not_rdma           | 1    | the agent's netdev owning the target has no RDMA device                        |
// | peer_port_down          | 1    | that netdev is down, or the port serving the target is not ACTIVE              |
// | firewall_roce           | 1    | connect unanswered (or data died) and a firewall drops UDP 4791                |
// | rp_filter               | 1    | the route back leaves by another netdev than packets arrive on, strict filter  |
// | roce_mode_mismatch      | 1    | the two ports' default RoCE modes differ (a warning when the run passed)       |
// | mtu_mismatch            | 1    | small transfers pass, those >= path MTU or 64 KiB die, and the MTUs differ     |
// | no_rdma_answer          | 1    | no agent, connect unanswered after resolution: candidates listed               |
// | unknown                 | 3    | nothing above fits: the raw steps as evidence                                  |
// clang-format on

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/base/report.hpp"
#include "lib/diag/connect_diagnosis.hpp"
#include "lib/diag/connect_facts.hpp"
#include "lib/diag/host_queries.hpp"
#include "lib/diag/rule_table.hpp"

namespace rdmakit::diag {

const ConnectStep* ConnectAttempt::find(rdmakit::Step step) const {
  // The last one: a step may be retried.
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (it->name == step) return &*it;
  }
  return nullptr;
}

bool is_iwarp_port(const ViewPort& port) {
  return std::ranges::any_of(port.gids, [](const GidEntry& gid) { return gid.type == "iWARP"; });
}

bool kernel_sees_roce(const ViewDevice* device) {
  if (device == nullptr || device->driver.empty()) return true;
  return device->driver == "rdma_rxe" || device->driver == "siw";
}

namespace {

constexpr std::size_t large_transfer = std::size_t{64} * 1024;
constexpr int reject_invalid_service_id = 8;
constexpr int reject_consumer_defined = 28;

// ---- Questions on one host's view ----

std::string lower(std::string text) {
  std::ranges::transform(text, text.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

std::string upper(std::string text) {
  std::ranges::transform(text, text.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return text;
}

// Whether `device` sits on `netdev` with RoCE switched off (mlx5's enable_roce false): an
// Ethernet NIC made on the netdev whose ports hold no GID there. rdma_cm finds no device for
// the netdev's addresses, as if there were none.
bool roce_off_on(const HostView& view, const ViewDevice& device, const std::string& netdev) {
  const auto serves = gid_serves(view, netdev);
  return !device.ports.empty() && std::ranges::all_of(device.ports, [&serves](const ViewPort& port) {
    return port.link_layer == "Ethernet" && std::ranges::none_of(port.gids, serves);
  });
}

// The RDMA device that carries rdma_cm's traffic on `netdev`: none where there is none, or
// where RoCE is off on the one there.
const ViewDevice* serving_device(const HostView& view, const std::string& netdev) {
  const auto* device = rdma_device_on(view, netdev);
  return device == nullptr || roce_off_on(view, *device, netdev) ? nullptr : device;
}

// An RDMA netdev with an address: what the client could bind or route through instead.
std::pair<const ViewNetdev*, std::string> rdma_address(const HostView& view) {
  for (const auto& netdev : view.netdevs) {
    if (serving_device(view, netdev.name) != nullptr && !netdev.addresses.empty()) {
      return {&netdev, without_prefix(netdev.addresses.front())};
    }
  }
  return {nullptr, {}};
}

// An address on one of `view`'s RDMA netdevs that `other` (the far side) does not hold
// itself: the guests of a pair share some addresses on their private links.
std::pair<const ViewNetdev*, std::string> rdma_address_not_held_by(const HostView& view, const HostView& other) {
  for (const auto& netdev : view.netdevs) {
    if (serving_device(view, netdev.name) == nullptr) continue;
    for (const auto& held : netdev.addresses) {
      const auto address = without_prefix(held);
      if (address.starts_with("fe80:") || netdev_with_address(other, address) != nullptr) continue;
      return {&netdev, address};
    }
  }
  return {nullptr, {}};
}

bool is_down(const ViewNetdev& netdev) {
  return !netdev.up || lower(netdev.operstate) == "down";
}

bool is_wildcard(const std::string& address) {
  return address.empty() || address == "0.0.0.0" || address == "::";
}

}  // namespace

// ---- The facts of one case: lib/diag/connect_facts.hpp ----

bool ended_badly(const ConnectStep* step) {
  return step != nullptr && (step->status == StepStatus::failed || step->status == StepStatus::timeout);
}

// No answer at all from the server's RDMA CM: the REQ (or its reply) was lost.
bool unanswered(const ConnectStep* connect) {
  if (!ended_badly(connect)) return false;
  return connect->status == StepStatus::timeout || connect->errnum == ETIMEDOUT ||
         (connect->event == "RDMA_CM_EVENT_UNREACHABLE" && connect->errnum != ECONNREFUSED);
}

bool data_failed(const ConnectAttempt& attempt) {
  return std::ranges::any_of(attempt.data, [](const DataCheck& check) {
    return check.status == StepStatus::failed || check.status == StepStatus::timeout;
  });
}

namespace {

// A REJ with "invalid service ID": nothing listens on that service (port and port space).
bool no_service(const ConnectAttempt& attempt) {
  return attempt.rejection && !attempt.rejection->consumer && attempt.rejection->reason == reject_invalid_service_id;
}

std::string rejection_text(const Rejection& rejection) {
  return fmt::format("reject reason {}{}", rejection.reason,
                     rejection.reason_text.empty() ? "" : " (" + rejection.reason_text + ")");
}

}  // namespace

// ---- Shared with the --gid-index rules (lib/diag/connect_gid.cpp) ----

ViewPortRef port_serving(const HostView& view, const std::string& address, const std::string& netdev) {
  if (const auto holding = ports_serving(view, address, ""); !holding.empty()) return holding.front();
  const auto* device = rdma_device_on(view, netdev);
  if (device == nullptr || device->ports.empty()) return {device, nullptr};
  return {device, &device->ports.front()};
}

bool ok(const ConnectStep* step) {
  return step != nullptr && step->status == StepStatus::ok;
}

std::string step_text(const ConnectStep& step) {
  std::string text = fmt::format("{}: {}", step_name(step.name), to_string(step.status));
  if (step.errnum != 0) text += ", " + errno_text(step.errnum);
  if (!step.event.empty()) text += ", " + step.event;
  if (!step.detail.empty()) text += ", " + step.detail;
  return text + fmt::format(" ({:.1f} ms)", step.ms);
}

std::string agent_text(const AgentContact& agent) {
  return fmt::format("client: the agent at {} answered {}{}", agent.address.empty() ? "(not asked)" : agent.address,
                     to_string(agent.status), agent.detail.empty() ? "" : ": " + agent.detail);
}

ConnectVerdict found(ConnectCause cause, std::string summary, std::vector<std::string> evidence, std::string fix,
                     std::string fix_host, std::string next) {
  ConnectVerdict v;
  v.cause = cause;
  v.exit_code = ExitCode::cause_found;
  v.summary = std::move(summary);
  v.evidence = std::move(evidence);
  // Where the fix runs means nothing without a fix.
  v.fix_host = fix.empty() ? std::string() : std::move(fix_host);
  v.fix = std::move(fix);
  v.next = std::move(next);
  return v;
}

bool worked(const Facts& f) {
  return (f.route == nullptr || ok(f.route)) && ok(f.resolve_addr) && ok(f.resolve_route) && ok(f.connect) &&
         !data_failed(f.attempt);
}

namespace {

// ---- The host first: what diag-bind says about this host, where it stops RDMA here ----

// diag-bind's causes that are this host's alone (connect_host_causes). netdev_without_rdma
// counts only for the host's own address (for a remote one, the route is source_not_rdma's,
// told with the agent's view).
bool host_stops_rdma(const Facts& f) {
  const auto& host = f.c.host;
  if (!host || host->exit_code != ExitCode::cause_found || !listed_in<connect_host_causes>(host->cause.name())) {
    return false;
  }
  return host->cause != "netdev_without_rdma" || netdev_with_address(f.local, f.attempt.target) != nullptr;
}

ConnectVerdict host_cause(const Facts& f) {
  const auto& host = f.c.host;
  std::vector<std::string> evidence;
  for (const auto& detail : host->details) evidence.push_back("client: " + detail);
  evidence.push_back(
      fmt::format("client: {}'s verdict on this host: {}", f.c.siblings.diag_bind(), host->cause.name()));
  // host_stops_rdma took only connect_host_causes, every one of them a diag-connect cause.
  return found(*ConnectCause::named(host->cause.name()), host->summary, std::move(evidence), host->fix, "client",
               host->next);
}

}  // namespace

bool is_iwarp(const ViewPortRef& ref) {
  if (ref.device != nullptr && ref.device->driver == "siw") return true;
  return ref.port != nullptr && is_iwarp_port(*ref.port);
}

namespace {

// ---- The rules, in the order they are tried ----

ConnectVerdict works(const Facts& f) {
  const auto& a = f.attempt;
  ConnectVerdict v;
  v.cause = "ok";
  v.exit_code = ExitCode::ok;
  std::size_t largest = 0;
  for (const auto& check : a.data) largest = std::max(largest, check.bytes);
  v.summary = fmt::format(
      "connected to {}:{} ({}) from {} on {} ({} port {}, {}{}){}", a.target, a.port, a.port_space, a.source_address,
      a.source_netdev, a.device, a.device_port, a.gid_type,
      // iWARP has no path record, so no path MTU.
      a.path_mtu > 0 ? fmt::format(", path MTU {}", a.path_mtu) : std::string(),
      a.data.empty() ? (a.port_space == "udp"
                            ? "; the SIDR reply came (no data check in the UDP port space)"
                            : fmt::format("; no data check (the server is no {} agent)", f.c.siblings.diag_connect()))
                     : fmt::format("; {} transfers up to {} passed", a.data.size(), human_bytes(largest)));
  for (const auto* step : {f.resolve_addr, f.resolve_route, f.connect}) {
    v.evidence.push_back("client: " + step_text(*step));
  }
  return v;
}

// The netdev the client sends from, and what says it has no RDMA device.
struct ClientSource {
  std::string netdev;            // "" when neither the attempt nor the route names it
  bool routed_off_rdma = false;  // that netdev has no RDMA device
  bool refused = false;          // resolve_addr said ENODEV or EADDRNOTAVAIL
};

ClientSource client_source(const Facts& f) {
  ClientSource source{.netdev = f.attempt.source_netdev, .routed_off_rdma = false, .refused = false};
  if (source.netdev.empty() && f.local.route && f.local.route->errnum == 0) source.netdev = f.local.route->netdev;
  source.routed_off_rdma = !source.netdev.empty() && serving_device(f.local, source.netdev) == nullptr;
  source.refused =
      ended_badly(f.resolve_addr) && (f.resolve_addr->errnum == ENODEV || f.resolve_addr->errnum == EADDRNOTAVAIL);
  return source;
}

// The server holds the target on a netdev without RDMA too: no route on the client helps
// (the server's RDMA device has no GID for that address); another of its addresses does.
bool server_holds_target_off_rdma(const Facts& f) {
  return f.peer_owner() != nullptr && f.peer_port().device == nullptr;
}

bool sends_off_rdma(const Facts& f) {
  const auto source = client_source(f);
  if (!source.routed_off_rdma && !source.refused) return false;
  // A server with no RDMA address at all is peer_not_rdma's.
  return !server_holds_target_off_rdma(f) || rdma_address_not_held_by(f.peer->view, f.local).first != nullptr;
}

ConnectVerdict neither_side_rdma(const Facts& f, const std::string& source, std::vector<std::string> evidence) {
  const auto& a = f.attempt;
  const auto* owner = f.peer_owner();
  const auto instead = rdma_address_not_held_by(f.peer->view, f.local);
  evidence.push_back(fmt::format("server: {} is on {}, which has no RDMA device; {} on {} has one", a.target,
                                 owner->name, instead.second, instead.first->name));
  return found(
      "source_not_rdma",
      fmt::format("neither side has an RDMA device on the way to {}: the client sends through {}, the "
                  "server holds it on {}",
                  a.target, source.empty() ? std::string("a netdev") : source, owner->name),
      std::move(evidence), "", "client",
      fmt::format("connect to the server's address on an RDMA netdev: {} ({})", instead.second, instead.first->name));
}

ConnectVerdict no_rdma_netdev_on_client(const Facts& f, const std::string& source, std::vector<std::string> evidence) {
  // diag-bind's verdict knows the NIC behind the netdev: RoCE switched off there (its
  // devlink remedy) or EFA is no case for soft-RoCE.
  if (const auto& host = f.c.host; host && host->cause == "netdev_without_rdma" && !host->next.empty()) {
    for (const auto& detail : host->details) evidence.push_back("client: " + detail);
    return found("source_not_rdma",
                 fmt::format("the client reaches {} through {}, and no netdev of the client has an RDMA device: {}",
                             f.attempt.target, source.empty() ? std::string("a netdev") : source, host->summary),
                 std::move(evidence), host->fix, "client", host->next);
  }
  // Without diag-bind's verdict the view still tells a NIC whose RoCE is off: soft-RoCE on
  // its netdev would hide it.
  if (const auto* nic = rdma_device_on(f.local, source); nic != nullptr && roce_off_on(f.local, *nic, source)) {
    evidence.push_back(fmt::format("client: {} is made on {} and holds no GID there", nic->name, source));
    const auto* netdev = netdev_named(f.local, source);
    const auto address = netdev != nullptr && !netdev->addresses.empty() ? without_prefix(netdev->addresses.front())
                                                                         : std::string("ADDRESS");
    return found("source_not_rdma",
                 fmt::format("the client reaches {} through {}, where {} has no GID: RoCE is off on it",
                             f.attempt.target, source, nic->name),
                 std::move(evidence), "", "client",
                 fmt::format("'{} {}' on the client names the NIC's PCI function and the devlink commands "
                             "that switch RoCE on",
                             f.c.siblings.diag_bind(), address));
  }
  const auto efa = std::ranges::find(f.local.devices, std::string("efa"), &ViewDevice::driver);
  if (efa != f.local.devices.end() && !source.empty()) {
    return found("source_not_rdma",
                 fmt::format("the client reaches {} through {}, and its RDMA device {} is EFA, which no rdma_cm "
                             "connection uses",
                             f.attempt.target, source, efa->name),
                 std::move(evidence), "", "client", efa_next_step(efa->name, source));
  }
  const bool soft_roce_fits = !source.empty() && source != "lo";
  return found("source_not_rdma",
               fmt::format("the client reaches {} through {}, and no netdev of the client has an RDMA device",
                           f.attempt.target, source.empty() ? std::string("a netdev") : source),
               std::move(evidence), soft_roce_fits ? rxe_link_command(source) : "", "client",
               soft_roce_fits ? "that makes a soft-RoCE device on " + source +
                                    "; with a RoCE NIC, reach the server through its netdev instead"
                              : "reach the server through a netdev with an RDMA device");
}

ConnectVerdict source_not_rdma(const Facts& f) {
  const auto& a = f.attempt;
  const auto client = client_source(f);
  const auto& source = client.netdev;
  std::vector<std::string> evidence;
  if (client.routed_off_rdma) {
    evidence.push_back(fmt::format("client: the route to {} leaves by {}{}, which has no RDMA device", a.target, source,
                                   f.local.route ? " (source " + f.local.route->source + ")" : ""));
  }
  if (client.refused) evidence.push_back("client: " + step_text(*f.resolve_addr));
  if (server_holds_target_off_rdma(f)) return neither_side_rdma(f, source, std::move(evidence));
  const auto [rdma_netdev, address] = rdma_address(f.local);
  if (rdma_netdev == nullptr) return no_rdma_netdev_on_client(f, source, std::move(evidence));
  const auto through = source.empty() ? std::string("a netdev") : source;
  const auto* device = serving_device(f.local, rdma_netdev->name);
  evidence.push_back(fmt::format("client: {} is on {}, served by {}", address, rdma_netdev->name, device->name));
  // A route cannot send the host's own address elsewhere: only another address helps.
  if (netdev_with_address(f.local, a.target) != nullptr) {
    return found("source_not_rdma",
                 fmt::format("{} is the client's own address on {}, which has no RDMA device", a.target, through),
                 std::move(evidence), "", "client",
                 fmt::format("connect to an address on an RDMA netdev, e.g. {} on {}", address, rdma_netdev->name));
  }
  return found("source_not_rdma",
               fmt::format("the client reaches {} through {}, which has no RDMA device; bind to {} (--bind {}) or "
                           "route through {}",
                           a.target, through, address, address, rdma_netdev->name),
               std::move(evidence),
               fmt::format("ip route add {}/32 dev {} src {}", a.target, rdma_netdev->name, address), "client",
               fmt::format("that route sends {} through {}; or bind the client to {} instead", a.target,
                           rdma_netdev->name, address));
}

bool unreachable_errno(int errnum) {
  return errnum == ENETUNREACH || errnum == EHOSTUNREACH;
}

// What says the client has no route to the target; none when nothing does.
std::vector<std::string> unreachable_evidence(const Facts& f) {
  std::vector<std::string> evidence;
  if (f.local.route && unreachable_errno(f.local.route->errnum)) {
    evidence.push_back(
        fmt::format("client: ip route get {}: {}", f.local.route->destination, errno_text(f.local.route->errnum)));
  }
  if (ended_badly(f.route) && unreachable_errno(f.route->errnum)) evidence.push_back("client: " + step_text(*f.route));
  if (ended_badly(f.resolve_addr) && f.resolve_addr->errnum == ENETUNREACH) {
    evidence.push_back("client: " + step_text(*f.resolve_addr));
  }
  return evidence;
}

bool unreachable(const Facts& f) {
  return !unreachable_evidence(f).empty();
}

// A netdev of the client that is down and holds an address in `target`'s subnet: the
// kernel took its connected route away with it, so the route is missing because of it.
const ViewNetdev* down_netdev_on_subnet(const HostView& view, const std::string& target) {
  for (const auto& netdev : view.netdevs) {
    if (!is_down(netdev)) continue;
    if (std::ranges::any_of(netdev.addresses, [&target](const std::string& own) { return in_subnet(target, own); })) {
      return &netdev;
    }
  }
  return nullptr;
}

ConnectVerdict no_route(const Facts& f) {
  auto evidence = unreachable_evidence(f);
  const auto& target = f.attempt.target;
  if (const auto* down = down_netdev_on_subnet(f.local, target)) {
    evidence.push_back(fmt::format("client: {} ({}): {}, operstate {}", down->name, join(down->addresses),
                                   down->up ? "up" : "not up (IFF_UP off)", down->operstate));
    auto summary = fmt::format("the client has no route to {}: its {}, which holds {}'s subnet, is down", target,
                               down->name, target);
    if (!down->up) {
      return found("no_route", std::move(summary), std::move(evidence), fmt::format("ip link set {} up", down->name),
                   "client");
    }
    // Up but without a carrier: nothing to type here fixes a cable.
    return found("no_route", std::move(summary), std::move(evidence), "", "",
                 fmt::format("{} is up without a carrier: 'ip link show {}' and 'ethtool {}' (cable, switch port)",
                             down->name, down->name, down->name));
  }
  const auto [rdma_netdev, address] = rdma_address(f.local);
  if (rdma_netdev == nullptr) {
    return found("no_route", fmt::format("the client has no route to {}, and no netdev with an RDMA device", target),
                 std::move(evidence), "", "client",
                 fmt::format("give the client an RDMA device first ({} says how), then a route to {} through it",
                             f.c.siblings.diag_bind(), target));
  }
  evidence.push_back(
      fmt::format("client: {} ({}) has an RDMA device", rdma_netdev->name, join(rdma_netdev->addresses)));
  return found("no_route",
               fmt::format("the client has no route to {}; add one through {} or an address in {}'s subnet", target,
                           rdma_netdev->name, target),
               std::move(evidence), fmt::format("ip route add {}/32 dev {}", target, rdma_netdev->name), "client",
               fmt::format("that route puts {} on {}'s link; if it sits behind a router, add 'via GATEWAY' instead",
                           target, rdma_netdev->name));
}

std::string neighbour_text(const Neighbour& n) {
  return fmt::format("neighbour {} dev {}: {}{}", n.address, n.netdev, n.state,
                     n.lladdr.empty() ? ", no link-layer address" : " lladdr " + n.lladdr);
}

bool resolution_unanswered(const Facts& f) {
  const auto* step = f.resolve_addr;
  if (!ended_badly(step)) return false;
  const bool unanswered_resolution = step->status == StepStatus::timeout || step->errnum == ETIMEDOUT ||
                                     step->errnum == EHOSTUNREACH || step->event == "RDMA_CM_EVENT_ADDR_ERROR";
  const auto& n = f.local.neighbour;
  const bool unresolved = !n || n->state == "INCOMPLETE" || n->state == "FAILED" || n->state == "none";
  return unanswered_resolution && unresolved;
}

ConnectVerdict neighbour_unresolved(const Facts& f) {
  const auto* step = f.resolve_addr;
  const auto& n = f.local.neighbour;
  const auto& target = f.attempt.target;
  std::string netdev = n ? n->netdev : "";
  if (netdev.empty() && f.local.route) netdev = f.local.route->netdev;
  std::vector<std::string> evidence{"client: " + step_text(*step)};
  evidence.push_back(n ? "client: " + neighbour_text(*n) : fmt::format("client: no neighbour entry for {}", target));
  const std::string address = n && !n->address.empty() ? n->address : target;
  return found("neighbour_unresolved",
               fmt::format("{} does not answer ARP/ND on {}: is the server up and on that link and subnet?", address,
                           netdev.empty() ? "the client's link" : netdev),
               std::move(evidence), "", "client",
               netdev.empty()
                   ? fmt::format("check that the server is up and holds {}", address)
                   : fmt::format("check that the server is up and holds {} on {}'s link: arping -c 3 -I {} {}", address,
                                 netdev, netdev, address));
}

// Without the agent the static entry alone is suspect; with it, only when the server's MAC differs.
bool static_neighbour_wrong(const Facts& f) {
  const auto& n = f.local.neighbour;
  if (!n || n->state != "PERMANENT" || !unanswered(f.connect)) return false;
  if (f.peer == nullptr) return true;
  const auto* owner = netdev_with_address(f.peer->view, n->address);
  return owner != nullptr && !owner->mac.empty() && lower(owner->mac) != lower(n->lladdr);
}

ConnectVerdict neighbour_wrong(const Facts& f) {
  const auto& n = f.local.neighbour;
  std::vector<std::string> evidence{"client: static " + neighbour_text(*n), "client: " + step_text(*f.connect)};
  if (f.peer != nullptr) {
    const auto* owner = netdev_with_address(f.peer->view, n->address);
    evidence.push_back(fmt::format("server: {} owns {} with MAC {}", owner->name, n->address, owner->mac));
  } else {
    evidence.push_back(agent_text(f.c.agent));
  }
  return found("neighbour_wrong",
               fmt::format("the client's static neighbour entry sends {}'s packets to {}, which does not answer",
                           n->address, n->lladdr.empty() ? "nowhere" : n->lladdr),
               std::move(evidence), fmt::format("ip neigh del {} dev {}", n->address, n->netdev), "client");
}

bool serves(const CmListener& listener, const ConnectAttempt& a, bool same_space) {
  return listener.port == a.port && (listener.port_space == a.port_space) == same_space &&
         (is_wildcard(listener.address) || canonical(listener.address) == canonical(a.target));
}

// The server's rdma_cm listeners, from the cm_id dump when it was readable, else the agent's own.
std::vector<CmListener> peer_listeners(const PeerAnswer& peer) {
  if (peer.view.listeners_known) return peer.view.listeners;
  if (!peer.serving) return {};
  return {CmListener{
      .port = peer.serving_port, .port_space = peer.serving_port_space, .address = peer.serving_address, .device = {}}};
}

std::string listener_text(const CmListener& l) {
  return fmt::format("{} {}/{}{}", is_wildcard(l.address) ? "*" : l.address, l.port, l.port_space,
                     l.device.empty() ? "" : " on " + l.device);
}

std::string listeners_text(const std::vector<CmListener>& listeners) {
  if (listeners.empty()) return "server: nothing listens on rdma_cm";
  std::vector<std::string> items;
  items.reserve(listeners.size());
  for (const auto& listener : listeners) items.push_back(listener_text(listener));
  return "server: rdma_cm listeners: " + join(items);
}

// The server's listener on the port in another port space, when none listens in the client's.
std::optional<CmListener> listener_in_other_space(const Facts& f) {
  const auto listeners = peer_listeners(*f.peer);
  const auto& a = f.attempt;
  const auto same = std::ranges::any_of(listeners, [&a](const CmListener& l) { return serves(l, a, true); });
  const auto other = std::ranges::find_if(listeners, [&a](const CmListener& l) { return serves(l, a, false); });
  if (same || other == listeners.end()) return std::nullopt;
  return *other;
}

bool other_port_space(const Facts& f) {
  return no_service(f.attempt) && f.peer != nullptr && listener_in_other_space(f).has_value();
}

ConnectVerdict wrong_port_space(const Facts& f) {
  const auto listeners = peer_listeners(*f.peer);
  const auto other = listener_in_other_space(f);
  const auto& a = f.attempt;
  return found(
      "wrong_port_space",
      fmt::format("the server listens on port {} in port space {}, the client asked in {}", a.port, other->port_space,
                  a.port_space),
      {"client: " + rejection_text(*a.rejection) + fmt::format(" for {}:{}/{}", a.target, a.port, a.port_space),
       listeners_text(listeners)},
      "", "client",
      fmt::format("connect in port space {} (RDMA_PS_{}), as the server listens; to check: {} {} -p {} --ps {}",
                  other->port_space, upper(other->port_space), f.c.siblings.diag_connect(), a.target, a.port,
                  other->port_space));
}

// Without the agent the REJ alone says so; with it, only when no listener of the server fits.
bool nothing_listens(const Facts& f) {
  if (!no_service(f.attempt)) return false;
  if (f.peer == nullptr) return true;
  const auto& a = f.attempt;
  return std::ranges::none_of(peer_listeners(*f.peer), [&a](const CmListener& l) { return serves(l, a, true); });
}

ConnectVerdict no_listener(const Facts& f) {
  const auto& a = f.attempt;
  std::vector<std::string> evidence{"client: " + rejection_text(*a.rejection) +
                                    fmt::format(" for {}:{}/{}", a.target, a.port, a.port_space)};
  if (f.peer != nullptr) {
    evidence.push_back(listeners_text(peer_listeners(*f.peer)));
  } else {
    evidence.push_back(agent_text(f.c.agent) + "; a REJ came back, so the host and the RDMA path work");
  }
  return found("no_listener", fmt::format("nothing listens on {}:{} in port space {}", a.target, a.port, a.port_space),
               std::move(evidence), "", "server",
               fmt::format("start the server application on {} port {} (is it running? is -p right?); "
                           "{} --serve on another port tells why a connection fails",
                           a.target, a.port, f.c.siblings.diag_connect()));
}

bool consumer_rejected(const Facts& f) {
  const auto& r = f.attempt.rejection;
  return r && (r->consumer || r->reason == reject_consumer_defined);
}

ConnectVerdict rejected_by_application(const Facts& f) {
  const auto& r = f.attempt.rejection;
  std::vector<std::string> evidence{"client: " + rejection_text(*r)};
  evidence.push_back(r->private_data.empty() ? "server: the application sent no private data"
                                             : "server: the application said: \"" + r->private_data + "\"");
  return found("rejected_by_application",
               fmt::format("the server application on {}:{} rejected the connection{}", f.attempt.target,
                           f.attempt.port, r->private_data.empty() ? "" : ": \"" + r->private_data + "\""),
               std::move(evidence), "", "server", "the server application refused it: its log says why");
}

ConnectVerdict peer_not_rdma(const Facts& f) {
  const auto* owner = f.peer_owner();
  std::vector<std::string> devices;
  devices.reserve(f.peer->view.devices.size());
  for (const auto& device : f.peer->view.devices) {
    devices.push_back(device.netdev.empty() ? device.name : device.name + " on " + device.netdev);
  }
  return found("peer_not_rdma",
               fmt::format("the server's {} is on {}, which has no RDMA device", f.attempt.target, owner->name),
               {fmt::format("server: {} owns {}; RDMA devices: {}", owner->name, f.attempt.target,
                            devices.empty() ? "none" : join(devices)),
                "server: a RoCE NIC needs RoCE enabled instead of a soft-RoCE device"},
               rxe_link_command(owner->name), "server",
               "that makes a soft-RoCE device on the server's " + owner->name +
                   "; with a RoCE NIC there, connect to the address on its netdev instead");
}

bool inactive(const ViewPortRef& ref) {
  return ref.port != nullptr && ref.port->state.find("ACTIVE") == std::string::npos;
}

bool peer_down(const Facts& f) {
  const auto* owner = f.peer_owner();
  return owner != nullptr && (is_down(*owner) || inactive(f.peer_port()));
}

ConnectVerdict peer_port_down(const Facts& f) {
  const auto* owner = f.peer_owner();
  if (is_down(*owner)) {
    return found("peer_port_down", fmt::format("the server's {} (holding {}) is down", owner->name, f.attempt.target),
                 {fmt::format("server: {}: {}, operstate {}", owner->name, owner->up ? "up" : "not up (IFF_UP off)",
                              owner->operstate)},
                 fmt::format("ip link set {} up", owner->name), "server");
  }
  const auto ref = f.peer_port();
  return found(
      "peer_port_down",
      fmt::format("the server's {} port {} (serving {}) is {}: check {}'s carrier", ref.device->name, ref.port->number,
                  f.attempt.target, ref.port->state, owner->name),
      {fmt::format("server: {} port {}: {}; {} is up, operstate {}", ref.device->name, ref.port->number,
                   ref.port->state, owner->name, owner->operstate)},
      "", "server",
      fmt::format("on the server: 'ip link show {}' and 'ethtool {}' (cable, switch port)", owner->name, owner->name));
}

bool cm_silent_without_agent(const Facts& f) {
  return f.peer == nullptr && ok(f.resolve_addr) && ok(f.resolve_route) && unanswered(f.connect);
}

ConnectVerdict no_rdma_answer(const Facts& f) {
  const auto& a = f.attempt;
  const auto& n = f.local.neighbour;
  std::vector<std::string> candidates;
  const auto consider = [&candidates](ConnectCause cause) {
    if (std::ranges::find(candidates, cause.name()) == candidates.end()) candidates.emplace_back(cause.name());
  };
  if (n && n->state == "PERMANENT") consider("neighbour_wrong");
  const auto client = f.client_port();
  if (client.port != nullptr && roce_version(client.port->roce_mode) == "v1") consider("roce_mode_mismatch");
  for (const auto cause : std::array<ConnectCause, 5>{"firewall_roce", "peer_not_rdma", "peer_port_down", "rp_filter",
                                                      "roce_mode_mismatch"}) {
    consider(cause);
  }
  std::vector<std::string> evidence{"client: " + step_text(*f.resolve_addr), "client: " + step_text(*f.connect)};
  if (n) evidence.push_back("client: " + neighbour_text(*n));
  evidence.push_back(agent_text(f.c.agent));
  const bool answered_arp = n && (n->state == "REACHABLE" || n->state == "STALE" || n->state == "DELAY" ||
                                  n->state == "PROBE" || n->state == "PERMANENT");
  auto v = found("no_rdma_answer",
                 fmt::format("{} {} but no RDMA CM answer came back, and no agent answered to tell why", a.target,
                             answered_arp ? "answers ARP (neighbour " + n->state + ")" : "resolves"),
                 std::move(evidence), "", "server",
                 fmt::format("run {} --serve on the server and connect to it: the agent tells which of the "
                             "candidates it is",
                             f.c.siblings.diag_connect()));
  v.candidates = std::move(candidates);
  return v;
}

ConnectVerdict unexplained(const Facts& f) {
  ConnectVerdict v;
  v.cause = "unknown";
  v.exit_code = ExitCode::unexplained;
  v.summary = fmt::format("the connection to {}:{} failed and {} cannot name the cause", f.attempt.target,
                          f.attempt.port, f.c.siblings.diag_connect());
  for (const auto& step : f.attempt.steps) v.evidence.push_back("client: " + step_text(step));
  if (f.attempt.rejection) v.evidence.push_back("client: " + rejection_text(*f.attempt.rejection));
  for (const auto& check : f.attempt.data) {
    if (check.status != StepStatus::ok) {
      v.evidence.push_back(fmt::format("client: data check {} {} B: {}, {}", check.operation, check.bytes,
                                       to_string(check.status), check.detail));
    }
  }
  v.next = f.peer == nullptr
               ? fmt::format("run {} --serve on the server and connect to it, then compare the evidence of both sides",
                             f.c.siblings.diag_connect())
               : "rerun with --log-level debug, and compare 'rdma link show' and 'ip addr' on both hosts";
  const auto client = f.client_port();
  const auto server = f.peer != nullptr ? f.peer_port() : ViewPortRef{};
  if (!kernel_sees_roce(client.device) || (f.peer != nullptr && !kernel_sees_roce(server.device))) {
    v.next += is_iwarp(client) || is_iwarp(server)
                  ? "; a hardware iWARP NIC runs its TCP on the card, which the hosts' firewall and rp_filter never "
                    "see: look at what lies between them (switch ACLs, 'ethtool -S' drop counters on both NICs)"
                  : "; a hardware RoCE NIC's traffic never meets the hosts' firewall or rp_filter: look at what lies "
                    "between them (switch ACLs, PFC and ECN settings, 'ethtool -S' drop counters on both NICs)";
  }
  if (f.peer == nullptr) {
    v.evidence.push_back(agent_text(f.c.agent));
  } else if (!f.peer->view.firewall.readable) {
    v.evidence.push_back("server: firewall not readable: " + f.peer->view.firewall.error);
    v.candidates.emplace_back(ConnectCause("firewall_roce").name());
  }
  return v;
}

// Differences that did not decide this verdict, tagged with the cause they would be.
void add_warnings(const Facts& f, ConnectVerdict& v) {
  const auto add = [&v](ConnectCause cause, const std::string& text) {
    if (v.cause != cause) v.warnings.push_back(text);
  };
  add_link_warnings(f, v);
  for (const auto& block : firewall_blocks_seen(f)) add("firewall_roce", block);
  add_gid_warnings(f, v);
}

// ---- The table: the rules in the order they are tried ----

using ConnectRule = Rule<Facts, ConnectVerdict>;

constexpr ConnectRule connect_rules[] = {
    {"gid_link_local", gid_index_link_local, gid_link_local_verdict},
    {"gid_index_mismatch", gid_index_differs, gid_index_mismatch_verdict},
    {"ok", worked, works},
    {"host_cause", host_stops_rdma, host_cause},
    {"source_not_rdma", sends_off_rdma, source_not_rdma},
    {"no_subnet_manager", side_lacks_subnet_manager, no_subnet_manager_verdict},
    {"pkey_mismatch", partitions_differ, pkey_mismatch_verdict},
    {"no_route", unreachable, no_route},
    {"neighbour_unresolved", resolution_unanswered, neighbour_unresolved},
    {"no_path_record", path_record_refused, no_path_record_verdict},
    {"neighbour_wrong", static_neighbour_wrong, neighbour_wrong},
    {"wrong_port_space", other_port_space, wrong_port_space},
    {"no_listener", nothing_listens, no_listener},
    {"rejected_by_application", consumer_rejected, rejected_by_application},
    {"peer_not_rdma", server_holds_target_off_rdma, peer_not_rdma},
    {"peer_port_down", peer_down, peer_port_down},
    {"firewall_roce", firewall_blocks, firewall_roce},
    {"rp_filter", reverse_path_filtered, rp_filter},
    {"roce_mode_mismatch", roce_modes_differ, roce_mode_mismatch},
    {"mtu_mismatch", mtu_differs, mtu_mismatch},
    {"no_rdma_answer", cm_silent_without_agent, no_rdma_answer},
    {"unknown", [](const Facts&) { return true; }, unexplained},
};

}  // namespace

ConnectVerdict diagnose_connect(const ConnectCase& connect_case) {
  const Facts facts(connect_case);
  // The last rule fits whatever is left, so one always does.
  ConnectVerdict verdict = first_match(connect_rules, facts)->make(facts);
  add_warnings(facts, verdict);
  return verdict;
}

}  // namespace rdmakit::diag
