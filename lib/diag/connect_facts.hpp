#pragma once
// What the connect verdict's rules share, internal to lib/diag/: the facts of one case,
// gathered once, and the helpers that word a verdict. lib/diag/connect_verdict.cpp holds the
// table and most rules; lib/diag/connect_gid.cpp the --gid-index rules,
// lib/diag/connect_infiniband.cpp the subnet manager's and lib/diag/connect_firewall.cpp the
// kernel's drops.

#include <cstdint>
#include <string>
#include <vector>

#include "lib/diag/causes.hpp"
#include "lib/diag/connect_diagnosis.hpp"
#include "lib/diag/host_queries.hpp"

namespace rdmakit::diag {

using ViewPortRef = PortRef<ViewDevice>;

// The port holding a GID for the address, else the first port of a device on its netdev.
// One port, not ports_serving's list: the address's own GID wins over the netdev, and a
// device on the netdev counts even when none of its GIDs names it (or it has no port).
ViewPortRef port_serving(const HostView& view, const std::string& address, const std::string& netdev);

struct Facts {
  const ConnectCase& c;
  const ConnectAttempt& attempt;
  const HostView& local;
  const PeerAnswer* peer;  // only when the agent answered
  const ConnectStep* route;
  const ConnectStep* resolve_addr;
  const ConnectStep* resolve_route;
  const ConnectStep* connect;

  explicit Facts(const ConnectCase& connect_case)
      : c(connect_case),
        attempt(connect_case.attempt),
        local(connect_case.local),
        peer(connect_case.agent.status == AgentStatus::ok && connect_case.peer ? &*connect_case.peer : nullptr),
        route(attempt.find(rdmakit::Step::route)),
        resolve_addr(attempt.find(rdmakit::Step::resolve_addr)),
        resolve_route(attempt.find(rdmakit::Step::resolve_route)),
        connect(attempt.find(rdmakit::Step::connect)) {}

  // The netdev that owns the target on the server, from the agent's view.
  const ViewNetdev* peer_owner() const { return peer ? netdev_with_address(peer->view, attempt.target) : nullptr; }
  ViewPortRef peer_port() const {
    const auto* owner = peer_owner();
    return peer ? port_serving(peer->view, attempt.target, owner ? owner->name : "") : ViewPortRef{};
  }
  std::string client_netdev() const {
    if (!attempt.source_netdev.empty()) return attempt.source_netdev;
    const auto* owner = netdev_with_address(local, attempt.source_address);
    return owner ? owner->name : "";
  }
  ViewPortRef client_port() const {
    const auto named = port_named(local, attempt.device, attempt.device_port);
    return named.port ? named : port_serving(local, attempt.source_address, client_netdev());
  }
};

// Whether `address` lies in the subnet of `with_prefix` ("10.57.0.2/24"); false for text that
// is not an address of the same family, and for an address without a prefix length.
bool in_subnet(const std::string& address, const std::string& with_prefix);

bool ok(const ConnectStep* step);
// The step failed or timed out.
bool ended_badly(const ConnectStep* step);
// No answer at all from the server's RDMA CM: the REQ (or its reply) was lost.
bool unanswered(const ConnectStep* connect);
// A data check failed or timed out.
bool data_failed(const ConnectAttempt& attempt);
bool is_iwarp(const ViewPortRef& ref);
// Resolution and connect passed and no data check failed.
bool worked(const Facts& f);
std::string step_text(const ConnectStep& step);
std::string agent_text(const AgentContact& agent);
// A verdict that names its cause (exit 1); fix_host only where there is a fix.
ConnectVerdict found(ConnectCause cause, std::string summary, std::vector<std::string> evidence, std::string fix = {},
                     std::string fix_host = {}, std::string next = {});

// The --gid-index rules and the warnings about GID indexes on a connection that worked
// (lib/diag/connect_gid.cpp).
bool gid_index_link_local(const Facts& f);
bool gid_index_differs(const Facts& f);
ConnectVerdict gid_link_local_verdict(const Facts& f);
ConnectVerdict gid_index_mismatch_verdict(const Facts& f);
void add_gid_warnings(const Facts& f, ConnectVerdict& v);

// What the kernel drops on the way: a firewall, a strict reverse-path filter
// (lib/diag/connect_firewall.cpp).
bool firewall_blocks(const Facts& f);
ConnectVerdict firewall_roce(const Facts& f);
bool reverse_path_filtered(const Facts& f);
ConnectVerdict rp_filter(const Facts& f);
// What each side's firewall drops, a line per side ("client: ..."), for the warnings of a
// verdict that is not firewall_roce.
std::vector<std::string> firewall_blocks_seen(const Facts& f);

// The two ends' link settings: RoCE modes and MTUs that differ (lib/diag/connect_link.cpp),
// and the RoCE version ("v1", "v2", "") a port's mode or a GID type names.
std::string roce_version(const std::string& mode);
bool roce_modes_differ(const Facts& f);
ConnectVerdict roce_mode_mismatch(const Facts& f);
bool mtu_differs(const Facts& f);
ConnectVerdict mtu_mismatch(const Facts& f);
// The MTU and RoCE-mode differences that did not decide `v`, as its warnings.
void add_link_warnings(const Facts& f, ConnectVerdict& v);

// The InfiniBand rules: the subnet manager's part (lib/diag/connect_infiniband.cpp).
bool side_lacks_subnet_manager(const Facts& f);
ConnectVerdict no_subnet_manager_verdict(const Facts& f);
bool partitions_differ(const Facts& f);
ConnectVerdict pkey_mismatch_verdict(const Facts& f);
bool path_record_refused(const Facts& f);
ConnectVerdict no_path_record_verdict(const Facts& f);

}  // namespace rdmakit::diag
