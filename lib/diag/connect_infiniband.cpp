// The connect verdict's InfiniBand rules: the subnet manager's part (a port without one, a
// partition the two sides do not share, a path record refused). The table that orders them is in
// lib/diag/connect_verdict.cpp.

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lib/diag/connect_facts.hpp"

namespace rdmakit::diag {

namespace {

// ---- InfiniBand: the subnet manager's part ----

// One side's IPoIB netdev and the IB port it runs on (a P_Key child's is its parent's).
struct IbSide {
  const char* host = "";  // "client" or "server"
  const ViewNetdev* netdev = nullptr;
  ViewPortRef port;
};

ViewPortRef ib_port_of(const HostView& view, const ViewNetdev* netdev, ViewPortRef fallback) {
  if (netdev != nullptr) {
    if (const auto port = ipoib_port(view, *netdev); port.port != nullptr) return port;
  }
  return fallback.port != nullptr && fallback.port->link_layer == "InfiniBand" ? fallback : ViewPortRef{};
}

std::vector<IbSide> ib_sides(const Facts& f) {
  std::vector<IbSide> sides;
  // Before address resolution worked, the route names the netdev the client sends from.
  const auto* client = netdev_named(f.local, f.client_netdev());
  if (client == nullptr && f.local.route) client = netdev_named(f.local, f.local.route->netdev);
  if (auto port = ib_port_of(f.local, client, f.client_port()); port.port != nullptr)
    sides.push_back({"client", client, port});
  if (f.peer != nullptr) {
    const auto* owner = f.peer_owner();
    if (auto port = ib_port_of(f.peer->view, owner, f.peer_port()); port.port != nullptr)
      sides.push_back({"server", owner, port});
  }
  return sides;
}

std::optional<IbSide> side_without_subnet_manager(const Facts& f) {
  for (const auto& side : ib_sides(f)) {
    if (awaits_subnet_manager(*side.port.port, "")) return side;
  }
  return std::nullopt;
}

}  // namespace

bool side_lacks_subnet_manager(const Facts& f) {
  return !worked(f) && side_without_subnet_manager(f).has_value();
}

ConnectVerdict no_subnet_manager_verdict(const Facts& f) {
  const auto side = *side_without_subnet_manager(f);
  const auto& [device, port] = side.port;
  return found("no_subnet_manager",
               fmt::format("the {}'s {} port {} is {} with LID {} and SM LID {}: no subnet manager has configured "
                           "this InfiniBand port, so nothing reaches it",
                           side.host, device->name, port->number, port->state, port->lid, port->sm_lid),
               {fmt::format("{}: {} port {}: {}, LID {}, SM LID {}", side.host, device->name, port->number, port->state,
                            port->lid, port->sm_lid)},
               "", side.host, subnet_manager_next_step(device->name, port->number) + " (on the " + side.host + ")");
}

namespace {

struct PartitionProblem {
  std::string summary;
  std::vector<std::string> evidence;
  std::string host;
  std::string next;
};

std::string partition_evidence(const IbSide& side) {
  return fmt::format("{}: {} has P_Key {}; {} port {} holds P_Keys {}", side.host, side.netdev->name,
                     pkey_text(side.netdev->pkey), side.port.device->name, side.port.port->number,
                     pkeys_text(side.port.port->pkeys));
}

std::string partition_next(const IbSide& side, int partition) {
  const auto& gids = side.port.port->gids;
  return std::string(side.host) + ": " +
         partition_next_step(gids.empty() ? std::string() : port_guid_of(gids.front().gid), partition);
}

// Both ends on IPoIB: each port a member of its netdev's partition, the partitions the same,
// and not both limited members (they cannot talk to each other).
std::optional<PartitionProblem> partition_problem(const Facts& f) {
  std::vector<IbSide> sides;
  for (const auto& side : ib_sides(f)) {
    if (side.netdev != nullptr && side.netdev->pkey >= 0) sides.push_back(side);
  }
  for (const auto& side : sides) {
    const auto& pkeys = side.port.port->pkeys;
    if (pkeys.empty() || membership(pkeys, side.netdev->pkey)) continue;
    const auto partition = partition_of(side.netdev->pkey);
    return PartitionProblem{
        fmt::format("the {}'s {} is the IPoIB interface of P_Key {}, but {} port {} is no member of partition {}: "
                    "the subnet manager left it out, so {} has no carrier and rdma_cm finds no P_Key index",
                    side.host, side.netdev->name, pkey_text(side.netdev->pkey), side.port.device->name,
                    side.port.port->number, pkey_text(partition), side.netdev->name),
        {partition_evidence(side)},
        side.host,
        partition_next(side, partition)};
  }
  if (sides.size() != 2) return std::nullopt;
  const auto& client = sides[0];
  const auto& server = sides[1];
  const auto evidence = std::vector<std::string>{partition_evidence(client), partition_evidence(server)};
  if (partition_of(client.netdev->pkey) != partition_of(server.netdev->pkey)) {
    return PartitionProblem{
        fmt::format("the client's {} is in partition {} and the server's {} in partition {}: IPoIB and rdma_cm reach "
                    "only within one partition",
                    client.netdev->name, pkey_text(partition_of(client.netdev->pkey)), server.netdev->name,
                    pkey_text(partition_of(server.netdev->pkey))),
        evidence, "client",
        fmt::format("connect from an address on the client's interface of P_Key {} (create it with 'echo {} > "
                    "/sys/class/net/{}/create_child' if there is none)",
                    pkey_text(server.netdev->pkey), pkey_text(server.netdev->pkey | 0x8000),
                    client.netdev->name.substr(0, client.netdev->name.find('.')))};
  }
  const auto full = [](const IbSide& side) {
    const auto entry = membership(side.port.port->pkeys, side.netdev->pkey);
    return full_member(entry.value_or(side.netdev->pkey));
  };
  if (!full(client) && !full(server)) {
    const auto partition = partition_of(client.netdev->pkey);
    return PartitionProblem{fmt::format("both ports are limited members of partition {}: two limited members cannot "
                                        "talk to each other, one end must be a full member",
                                        pkey_text(partition)),
                            evidence, "server", partition_next(server, partition)};
  }
  return std::nullopt;
}

}  // namespace

bool partitions_differ(const Facts& f) {
  return !worked(f) && partition_problem(f).has_value();
}

ConnectVerdict pkey_mismatch_verdict(const Facts& f) {
  auto problem = *partition_problem(f);
  return found("pkey_mismatch", std::move(problem.summary), std::move(problem.evidence), "", problem.host,
               std::move(problem.next));
}

// On InfiniBand, route resolution is a path record query to the subnet administrator.
bool path_record_refused(const Facts& f) {
  const auto client = f.client_port();
  return ok(f.resolve_addr) && f.resolve_route != nullptr && !ok(f.resolve_route) && client.port != nullptr &&
         client.port->link_layer == "InfiniBand";
}

ConnectVerdict no_path_record_verdict(const Facts& f) {
  const auto& step = *f.resolve_route;
  const bool silent = step.status == StepStatus::timeout || step.errnum == ETIMEDOUT;
  const auto client = f.client_port();
  return found(
      "no_path_record",
      fmt::format("{} resolves, but {}: on InfiniBand the route is a path record from the subnet administrator, and {}",
                  f.attempt.target, silent ? "no path record came back" : "the path record query failed",
                  silent ? "it did not answer (the subnet manager is down or unreachable, or drops this port's "
                           "queries)"
                         : "it knows no path to that destination (another subnet, or no partition in common)"),
      {"client: " + step_text(step),
       fmt::format("client: {} port {}: {}, LID {}, SM LID {}", client.device->name, client.port->number,
                   client.port->state, client.port->lid, client.port->sm_lid)},
      "", "client",
      fmt::format("check the subnet manager: 'sminfo' (infiniband-diags) on the client shows whether one answers "
                  "at SM LID {}, and 'ibstat {} {}' the port's state; the SM's log says why it refused the path to {}",
                  client.port->sm_lid, client.device->name, client.port->number, f.attempt.target));
}

}  // namespace rdmakit::diag
