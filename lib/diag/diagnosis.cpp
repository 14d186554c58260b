// The bind verdict: the rules that name why an address cannot be bound or resolved on this
// host, tried in the order of the table at the end of this file; the first that fits wins.
// The same shape as diag-connect's (lib/diag/connect_verdict.cpp): the facts read once, then
// the rules over them.
//
// clang-format off
// | stage          | causes, in the order tried                                                               |
// |----------------|------------------------------------------------------------------------------------------|
// | not recorded   | unknown                                                                                  |
// | channel failed | no_rdma_device (no RDMA core, no device), provider_missing, uverbs_unavailable,          |
// |                | userspace_mismatch, rdma_cm_missing, rdma_cm_permission, unknown                         |
// | id failed      | unknown                                                                                  |
// | no address     | memlock_too_low, ok                                                                      |
// | refused        | (ENODEV from bind, resolve or route) gid_link_local, netdev_without_rdma,                |
// |                | provider_missing, userspace_mismatch, uverbs_unavailable, loopback_address,              |
// |                | gid_missing, unknown                                                                     |
// | remote         | (bind EADDRNOTAVAIL) address_not_local, no_route, unknown, no_subnet_manager,            |
// |                | pkey_mismatch, no_path_record, unknown, netdev_down, port_not_active                     |
// | bind failed    | unknown                                                                                  |
// | bound          | memlock_too_low and wildcard_address, loopback_address, unknown, no_subnet_manager,      |
// |                | netdev_down, port_not_active, pkey_mismatch, memlock_too_low, several_devices, ok        |
// clang-format on
// Then warnings (a low memlock limit, devices the two views disagree on) whatever the verdict.

#include "lib/diag/diagnosis.hpp"

#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/base/report.hpp"
#include "lib/diag/bind_remedies.hpp"
#include "lib/diag/causes.hpp"
#include "lib/diag/host_queries.hpp"
#include "lib/diag/rule_table.hpp"

namespace rdmakit::diag {

namespace {

// ---- Verdicts and remedies ----

Verdict verdict(BindCause cause, ExitCode exit_code, std::string summary, Remedy remedy = {}) {
  Verdict v;
  v.cause = cause;
  v.exit_code = exit_code;
  v.summary = std::move(summary);
  v.fix = std::move(remedy.fix);
  v.next = std::move(remedy.next);
  return v;
}

Verdict unknown(const SiblingNames& siblings, std::string summary) {
  return verdict("unknown", ExitCode::unexplained,
                 std::move(summary) + "; " + siblings.diag_bind() +
                     " cannot name the cause: the inventory and attempt above are the raw data",
                 next_step("compare 'rdma link show' and 'ibv_devinfo' (the kernel's and libibverbs' views) with the "
                           "inventory above, and rerun with --log-level debug"));
}

// ---- The facts of one diagnosis, gathered once ----

// Which call decided the attempt; each stage has its own rules.
enum class Stage {
  not_recorded,    // no rdma_create_event_channel step
  channel_failed,  // librdmacm could not start
  id_failed,       // rdma_create_id failed
  host_only,       // no address: the inventory alone
  refused,         // bind, resolve or route said ENODEV: no device for the address
  remote,          // the bind said EADDRNOTAVAIL: the address was tried as a destination
  bind_failed,     // the bind failed another way
  not_bound,       // the bind was not attempted
  bound,           // the bind worked
};

struct BindFacts {
  const Target& target;
  const Inventory& inventory;
  const Attempt& attempt;
  const SiblingNames& siblings;
  const Step* channel;
  const Step* id;
  const Step* bind;
  const Step* resolve;
  const Step* route;
  const Step* registration;
  const Netdev* egress;  // the netdev the kernel routes from (route_source), when known
  // The device and port the cm_id was attached to, when the kernel has them.
  const KernelDevice* device = nullptr;
  const KernelPort* port = nullptr;
  Stage stage = Stage::not_recorded;
  // Stage::refused: the call that said ENODEV, the netdev the address is on or leaves by,
  // the ports that serve either, and libibverbs' view of the first one's device.
  const Step* refusal = nullptr;
  const Netdev* refused_on = nullptr;
  std::vector<PortRef<KernelDevice>> serving;
  const UserDevice* serving_user = nullptr;
  // Stage::refused for a destination: the port on the netdev its route leaves by
  // (attempt.route_netdev), and that port's GIDs on that netdev.
  PortRef<KernelDevice> route_port;
  std::vector<GidEntry> route_gids;

  BindFacts(const Target& t, const Inventory& i, const Attempt& a, const SiblingNames& s)
      : target(t),
        inventory(i),
        attempt(a),
        siblings(s),
        channel(a.find("rdma_create_event_channel")),
        id(a.find("rdma_create_id")),
        bind(a.find("rdma_bind_addr")),
        resolve(a.find("rdma_resolve_addr")),
        route(a.find("rdma_resolve_route")),
        registration(a.find("ibv_reg_mr")),
        egress(a.route_source.empty() ? nullptr : netdev_owning(i, a.route_source)) {
    const auto attached = port_named(i, a.device, a.port);
    device = attached.device;
    port = attached.port;
    stage = stage_of();
    if (stage == Stage::refused) {
      serving = ports_serving(inventory, target.host, refused_on ? refused_on->name : std::string());
      if (!serving.empty()) serving_user = user_view_of(inventory, *serving.front().device);
      if (refusal->call != "rdma_bind_addr") find_route_port();
    }
  }

  bool channel_says(int errnum) const { return stage == Stage::channel_failed && channel->errnum == errnum; }
  // The port behind the attached device is there but not ACTIVE: nothing after the bind works.
  bool port_inactive() const { return port != nullptr && port->state_code != 4 && port->state_code != 5; }

 private:
  void find_route_port() {
    const auto& netdev = attempt.route_netdev;
    const auto ports = netdev.empty() ? decltype(serving){} : ports_serving(inventory, "", netdev);
    if (ports.empty()) return;
    route_port = ports.front();
    for (const auto& entry : route_port.port->gids) {
      if (entry.netdev == netdev) route_gids.push_back(entry);
    }
  }

  static bool failed(const Step* step) { return step != nullptr && !step->ok(); }
  static bool failed_with(const Step* step, int errnum) { return failed(step) && step->errnum == errnum; }

  Stage refused_by(const Step* step, const Netdev* netdev) {
    refusal = step;
    refused_on = netdev;
    return Stage::refused;
  }

  // A remote address: resolution, then the route, may still say ENODEV.
  Stage remote_stage() {
    if (failed_with(resolve, ENODEV)) return refused_by(resolve, egress);
    if (resolve != nullptr && resolve->ok() && failed_with(route, ENODEV)) return refused_by(route, egress);
    return Stage::remote;
  }

  Stage stage_of() {
    if (channel == nullptr) return Stage::not_recorded;
    if (!channel->ok()) return Stage::channel_failed;
    if (failed(id)) return Stage::id_failed;
    if (target.host.empty()) return Stage::host_only;
    if (failed_with(bind, EADDRNOTAVAIL)) return remote_stage();
    if (failed_with(bind, ENODEV)) return refused_by(bind, netdev_owning(inventory, target.host));
    if (failed(bind)) return Stage::bind_failed;
    return bind == nullptr ? Stage::not_bound : Stage::bound;
  }
};

bool failed(const Step* step) {
  return step != nullptr && !step->ok();
}

// ---- librdmacm could not start (rdma_create_event_channel failed) ----

bool channel_enodev(const BindFacts& f) {
  return f.channel_says(ENODEV);
}

bool no_user_devices(const BindFacts& f) {
  return channel_enodev(f) && f.inventory.user_devices.empty();
}

std::vector<std::string> devices_without_provider(const Inventory& inventory) {
  std::vector<std::string> without_provider;
  for (const auto& device : inventory.kernel_devices) {
    if (!has_provider(inventory, device)) {
      without_provider.push_back(fmt::format("{} (driver {}, needs provider lib{}-rdmav*.so)", device.name,
                                             device.driver, provider_for(device.driver)));
    }
  }
  return without_provider;
}

bool is_one_of(int errnum, std::initializer_list<int> errnums) {
  return std::ranges::find(errnums, errnum) != errnums.end();
}

// Errors that say the rdma_cm node is missing or closed to us.
bool cm_node_refused(const BindFacts& f) {
  return f.stage == Stage::channel_failed && is_one_of(f.channel->errnum, {ENOENT, EACCES, EPERM, ENXIO, ENOSYS});
}

Verdict no_rdma_core(const BindFacts& f) {
  return verdict("no_rdma_device", ExitCode::cause_found,
                 "this kernel has no RDMA core loaded (no /sys/class/infiniband), so there is no device at all "
                 "(rdma_create_event_channel: ENODEV)",
                 no_device_remedy(f.inventory));
}

Verdict no_kernel_device(const BindFacts& f) {
  auto v = verdict("no_rdma_device", ExitCode::cause_found,
                   "the kernel has no RDMA device at all, so librdmacm finds nothing to work with "
                   "(rdma_create_event_channel: ENODEV)",
                   no_device_remedy(f.inventory));
  if (const auto* candidate = rxe_candidate(f.inventory)) {
    v.details.push_back("no RDMA NIC driver is bound; soft-RoCE (rxe) can run on " + candidate->name + " for testing");
  }
  return v;
}

Verdict providers_missing(const BindFacts& f) {
  const auto& inventory = f.inventory;
  return verdict("provider_missing", ExitCode::cause_found,
                 "the kernel has " + std::to_string(inventory.kernel_devices.size()) +
                     " RDMA device(s) but libibverbs lists none: no user-space provider library for " +
                     join(devices_without_provider(inventory)),
                 command("apt-get install ibverbs-providers",
                         "in a container image, check that " +
                             (inventory.provider_dir.empty() ? std::string("the libibverbs provider directory")
                                                             : inventory.provider_dir) +
                             " and /etc/libibverbs.d are present"));
}

Verdict uverbs_out_of_reach(const BindFacts& f) {
  const auto reach = uverbs_reach(f.inventory);
  return verdict("uverbs_unavailable", ExitCode::cause_found,
                 "the kernel has the RDMA device but user space cannot reach it: " + join(reach.hidden, "; "),
                 uverbs_remedy(reach));
}

Verdict user_space_lists_none(const BindFacts& f) {
  return verdict("userspace_mismatch", ExitCode::cause_found,
                 "the kernel lists " + std::to_string(f.inventory.kernel_devices.size()) +
                     " RDMA device(s), libibverbs lists none, and neither a missing provider nor a missing "
                     "uverbs node explains it",
                 next_step("run 'IBV_SHOW_WARNINGS=1 ibv_devices' to see what libibverbs rejects"));
}

Verdict rdma_cm_missing(const BindFacts& f) {
  if (module_loaded(f.inventory, "rdma_ucm")) {
    return verdict("rdma_cm_missing", ExitCode::cause_found,
                   "/dev/infiniband/rdma_cm does not exist although rdma_ucm is loaded (a container "
                   "or a /dev without udev)",
                   command("mkdir -p /dev/infiniband && mknod -m 666 /dev/infiniband/rdma_cm c 10 "
                           "\"$(cut -d: -f2 /sys/class/misc/rdma_cm/dev)\"",
                           "in a container, pass the host's node in instead (docker run --device "
                           "/dev/infiniband/rdma_cm ...)"));
  }
  return verdict("rdma_cm_missing", ExitCode::cause_found,
                 "/dev/infiniband/rdma_cm does not exist: the rdma_ucm module is not loaded",
                 command("modprobe rdma_ucm"));
}

Verdict rdma_cm_closed(const BindFacts& f) {
  const auto& node = f.inventory.rdma_cm;
  return verdict("rdma_cm_permission", ExitCode::cause_found,
                 "/dev/infiniband/rdma_cm exists (" + node.mode + ") but this user may not open it (" +
                     errno_name(node.access_errno) + ")",
                 command("chmod 666 /dev/infiniband/rdma_cm",
                         "rdma-core's udev rules give the node that mode; or run as a user allowed to open it"));
}

// ---- No address given, or an address bound: what the registration and the port say ----

Verdict registration_failed(const BindFacts& f) {
  const auto& reg = *f.registration;
  if (reg.errnum != ENOMEM && reg.errnum != EPERM && reg.errnum != EAGAIN) {
    return unknown(f.siblings, "ibv_reg_mr failed: " + errno_text(reg.errnum));
  }
  const auto& m = f.inventory.memlock;
  return verdict(
      "memlock_too_low", ExitCode::cause_found,
      fmt::format("the bind works, but registering {} fails with {}: the locked-memory limit is {}{}", reg.subject,
                  errno_name(reg.errnum), m.soft_bytes ? human_bytes(*m.soft_bytes) : std::string("unlimited"),
                  m.cap_ipc_lock ? "" : " and this process lacks CAP_IPC_LOCK"),
      memlock_remedy(m));
}

Verdict host_usable(const BindFacts& f) {
  return verdict("ok", ExitCode::ok,
                 fmt::format("librdmacm starts and sees {} device(s); give an address to test a bind",
                             f.inventory.user_devices.size()));
}

void add_instead(const Inventory& inventory, Verdict& v) {
  if (auto instead = use_instead(inventory); !instead.empty()) v.details.push_back(std::move(instead));
}

Verdict wildcard(const BindFacts& f) {
  auto v = verdict("wildcard_address", ExitCode::ok,
                   f.target.host +
                       " is the wildcard address: the bind works but attaches no device; a listener "
                       "on it accepts on every RDMA device, and each connection gets the device its "
                       "route uses");
  add_instead(f.inventory, v);
  return v;
}

Verdict loopback(const BindFacts& f) {
  const auto* route = f.route;
  auto v = verdict("loopback_address", ExitCode::cause_found,
                   f.target.host +
                       " is a loopback address: the bind works but attaches no device, and a client "
                       "cannot reach it over RoCE" +
                       (failed(route) ? " (rdma_resolve_route: " + errno_name(route->errnum) + ")" : std::string()),
                   next_step(loopback_instead(f.inventory)));
  add_instead(f.inventory, v);
  return v;
}

Verdict port_not_active(const BindFacts& f) {
  const auto& device = *f.device;
  const auto& port = *f.port;
  std::string netdev_name = device.parent_netdev;
  for (const auto& entry : port.gids) {
    if (!entry.netdev.empty()) netdev_name = entry.netdev;
  }
  const auto* netdev = netdev_named(f.inventory, netdev_name);
  if (netdev && !netdev->up) {
    return verdict("netdev_down", ExitCode::cause_found,
                   fmt::format("{} binds to {} port {}, but its netdev {} is administratively down, so the port is {} "
                               "({}): connections will time out",
                               f.target.host, device.name, port.number, netdev->name, port.state, port.phys_state),
                   command("ip link set " + netdev->name + " up"));
  }
  const bool infiniband = port.link_layer == "InfiniBand";
  return verdict(
      "port_not_active", ExitCode::cause_found,
      fmt::format(
          "{} binds to {} port {}, but the port is {} ({}){}: connections will time out", f.target.host, device.name,
          port.number, port.state, port.phys_state,
          infiniband ? "; an IB port needs a subnet manager to become ACTIVE" : "; check the cable/switch port"),
      next_step(infiniband
                    ? fmt::format("start a subnet manager (opensm) on the fabric, then check 'ibstat {}'", device.name)
                : netdev ? fmt::format("check the link: 'ip link show {}' and 'ethtool {}' (cable, switch port)",
                                       netdev->name, netdev->name)
                         : fmt::format("check the link: 'rdma link show {}/{}'", device.name, port.number)));
}

// ---- InfiniBand: what only a subnet manager gives a port ----

// The netdev the address is on (bound) or leaves by (remote, also when resolution failed).
const Netdev* address_netdev(const BindFacts& f) {
  return f.stage == Stage::bound ? netdev_with_address(f.inventory, f.target.host) : f.egress;
}

// The IB port behind the address: the one rdma_cm attached, else the port of the IPoIB
// netdev's hardware-address GID (a P_Key child shares its parent's), which is all there is to
// go on when resolution failed on a port without carrier.
PortRef<KernelDevice> ib_port(const BindFacts& f) {
  if (f.port != nullptr) return {f.device, f.port};
  const auto* netdev = address_netdev(f);
  return netdev != nullptr ? ipoib_port(f.inventory, *netdev) : PortRef<KernelDevice>{};
}

bool without_subnet_manager(const BindFacts& f) {
  const auto ref = ib_port(f);
  return (f.stage == Stage::bound || f.stage == Stage::remote) && ref.port != nullptr &&
         awaits_subnet_manager(*ref.port, ref.port->phys_state);
}

Verdict no_subnet_manager(const BindFacts& f) {
  const auto ref = ib_port(f);
  const auto& port = *ref.port;
  return verdict(
      "no_subnet_manager", ExitCode::cause_found,
      fmt::format("{} {} {} port {}, an InfiniBand port whose link is up ({}) but which is {} with LID {} and SM LID "
                  "{}: no subnet manager has configured it, so nothing reaches it",
                  f.target.host, f.stage == Stage::bound ? "binds to" : "is reached through", ref.device->name,
                  port.number, port.phys_state, port.state, port.lid, port.sm_lid),
      next_step(subnet_manager_next_step(ref.device->name, port.number)));
}

// The SM left the port out of the IPoIB netdev's partition: the netdev has no carrier, and
// rdma_cm finds no P_Key index for a QP (the bind itself does not look).
bool outside_partition(const BindFacts& f) {
  const auto* netdev = address_netdev(f);
  const auto ref = ib_port(f);
  return netdev != nullptr && netdev->pkey >= 0 && ref.port != nullptr && !ref.port->pkeys.empty() &&
         !membership(ref.port->pkeys, netdev->pkey).has_value();
}

Verdict pkey_mismatch(const BindFacts& f) {
  const auto& netdev = *address_netdev(f);
  const auto ref = ib_port(f);
  const auto& port = *ref.port;
  const auto partition = partition_of(netdev.pkey);
  const auto guid = port.gids.empty() ? std::string() : port_guid_of(port.gids.front().gid);
  return verdict(
      "pkey_mismatch", ExitCode::cause_found,
      fmt::format("{} is {} {}, the IPoIB interface of P_Key {}, but {} port {} is no member of partition {}: the "
                  "subnet manager gave the port P_Keys {} only, so {} has no carrier and connections find no P_Key "
                  "index",
                  f.target.host, f.stage == Stage::bound ? "on" : "reached through", netdev.name,
                  pkey_text(netdev.pkey), ref.device->name, port.number, pkey_text(partition), pkeys_text(port.pkeys),
                  netdev.name),
      next_step(partition_next_step(guid, partition) +
                "; or use an address on an interface of a partition the port is in"));
}

// Route resolution on InfiniBand is a path record query to the subnet administrator.
bool path_record_failed(const BindFacts& f) {
  return f.stage == Stage::remote && f.route != nullptr && !f.route->ok() && f.port != nullptr &&
         f.port->link_layer == "InfiniBand";
}

Verdict no_path_record(const BindFacts& f) {
  const bool silent = f.route->errnum == ETIMEDOUT;
  return verdict(
      "no_path_record", ExitCode::cause_found,
      fmt::format("{} resolves through {} port {}, but {} ({}): on InfiniBand the route is a path record from the "
                  "subnet administrator (SM LID {}), and {}",
                  f.target.host, f.device->name, f.port->number,
                  silent ? "no path record came back" : "the path record query failed", errno_name(f.route->errnum),
                  f.port->sm_lid,
                  silent ? "it did not answer: the subnet manager is down or unreachable, or it drops queries from "
                           "this port"
                         : "it knows no path to that destination (another subnet, or no shared partition)"),
      next_step(fmt::format("check the subnet manager: 'sminfo' (infiniband-diags) shows whether one answers at SM "
                            "LID {}, and 'ibstat {} {}' this port's state; the SM's log says why it refused the path",
                            f.port->sm_lid, f.device->name, f.port->number)));
}

// Which GID indices the bound address has on its port, and how a RoCE v2 peer names it.
void add_mapping_details(const BindFacts& f, Verdict& v) {
  if (f.device == nullptr) return;
  // IPoIB and iWARP addresses have no GID of their own: the port's GID on their netdev (the
  // hardware address's, the MAC's) is the entry.
  const auto* owner = netdev_with_address(f.inventory, f.target.host);
  const auto gid = owner != nullptr && !owner->ipoib_gid.empty() ? owner->ipoib_gid : gid_for_address(f.target.host);
  const auto& gids = f.port ? f.port->gids : std::vector<GidEntry>{};
  const auto names_address = [&](const GidEntry& entry) {
    return entry.gid == gid || (entry.type == "iWARP" && owner != nullptr && entry.netdev == owner->name);
  };
  std::vector<std::string> indices;
  std::optional<int> v2_index;
  std::string netdev;
  for (const auto& entry : gids) {
    if (!names_address(entry)) continue;
    indices.push_back(fmt::format("{} ({})", entry.index, entry.type));
    if (entry.type == "RoCE v2" && !v2_index) v2_index = entry.index;
    netdev = entry.netdev;
  }
  v.details.push_back(fmt::format("{} maps to {} port {}{}{}", f.target.host, f.device->name, f.attempt.port,
                                  netdev.empty() ? "" : " (netdev " + netdev + ")",
                                  indices.empty() ? "" : ", GID index " + join(indices)));
  if (v2_index) {
    v.details.push_back(fmt::format("a RoCE v2 peer reaches it with GID index {} (perftest: -d {} -x {})", *v2_index,
                                    f.device->name, *v2_index));
  }
}

std::string bound_device_name(const BindFacts& f) {
  return f.device ? f.device->name : f.attempt.device;
}

Verdict several_devices(const BindFacts& f) {
  const auto device_name = bound_device_name(f);
  auto v = verdict("several_devices", ExitCode::ok,
                   fmt::format("the bind works: of {} RDMA devices, {} belongs to {} port {}",
                               f.inventory.kernel_devices.size(), f.target.host, device_name, f.attempt.port));
  std::vector<std::string> others;
  for (const auto& other : f.inventory.kernel_devices) {
    if (other.name != device_name) others.push_back(other.name);
  }
  v.details.push_back("tools that take a device name need -d " + device_name + " for this address (not " +
                      join(others) + ")");
  add_mapping_details(f, v);
  return v;
}

Verdict bound_usable(const BindFacts& f) {
  auto v = verdict(
      "ok", ExitCode::ok,
      fmt::format("the bind works: {} belongs to {} port {}", f.target.host, bound_device_name(f), f.attempt.port));
  add_mapping_details(f, v);
  return v;
}

// ---- ENODEV from the bind, the address resolution or the route: which side refused? ----

bool refused_without_port(const BindFacts& f) {
  return f.stage == Stage::refused && f.serving.empty();
}

bool refused_unseen(const BindFacts& f) {
  return f.stage == Stage::refused && !f.serving.empty() && f.serving_user == nullptr;
}

Verdict netdev_without_rdma(const BindFacts& f) {
  const auto& host = f.target.host;
  const auto& netdev = *f.refused_on;
  auto v = verdict("netdev_without_rdma", ExitCode::cause_found,
                   f.refusal->call == "rdma_bind_addr"
                       ? fmt::format("{} is on {}, and no RDMA device has a GID on {}: the kernel has no device "
                                     "to bind it to",
                                     host, netdev.name, netdev.name)
                       : fmt::format("{} is reached through {}, and no RDMA device has a GID on {}: the kernel has "
                                     "no device to send from",
                                     host, netdev.name, netdev.name),
                   rxe_remedy(f.inventory, netdev));
  add_instead(f.inventory, v);
  return v;
}

Verdict provider_missing_for(const BindFacts& f) {
  const auto& device = *f.serving.front().device;
  return verdict("provider_missing", ExitCode::cause_found,
                 fmt::format("the kernel binds {} to {} (GUID {}), but libibverbs has no provider for driver {} so "
                             "librdmacm cannot match the device",
                             f.target.host, device.name, device.node_guid, device.driver),
                 command("apt-get install ibverbs-providers"));
}

Verdict unmatched_in_user_space(const BindFacts& f) {
  const auto& device = *f.serving.front().device;
  std::vector<std::string> seen;
  seen.reserve(f.inventory.user_devices.size());
  for (const auto& other : f.inventory.user_devices) {
    seen.push_back(fmt::format("{} GUID {} index {}", other.name, other.node_guid, index_text(other.index)));
  }
  return verdict("userspace_mismatch", ExitCode::cause_found,
                 fmt::format("the kernel binds {} to {} (GUID {}, index {}), but libibverbs does not list a device "
                             "with that GUID/index (it lists: {}); librdmacm then fails with ENODEV",
                             f.target.host, device.name, device.node_guid, index_text(device.index),
                             seen.empty() ? "none" : join(seen)),
                 next_step("expose the same devices to user space as the kernel has (a container's device list, "
                           "RDMAV_DRIVERS or IBV_* in the environment, a stale /sys bind mount)"));
}

// How the uverbs node at `path` looks to this user, for the summary ("" when it is usable).
std::string node_state(const Inventory& inventory, const std::string& path) {
  std::string state;
  for (const auto& node : inventory.uverbs_nodes) {
    if (node.path != path) continue;
    state = !node.exists ? " (the node does not exist)"
            : node.access_errno != 0
                ? fmt::format(" ({} is {}: {} for this user)", path, node.mode, errno_name(node.access_errno))
                : "";
  }
  return state;
}

Verdict device_unopened(const BindFacts& f) {
  const auto& device = *f.serving.front().device;
  const auto path = "/dev/infiniband/" + device.uverbs;
  const auto state = node_state(f.inventory, path);
  return verdict("uverbs_unavailable", ExitCode::cause_found,
                 fmt::format("{} is on {}, which libibverbs lists but cannot open (ibv_open_device: {}){}",
                             f.target.host, device.name, errno_name(f.serving_user->open_errno), state),
                 state == " (the node does not exist)"
                     ? next_step("in a container, pass the host's node in (docker run --device " + path + " ...)")
                     : command("chmod 666 " + path,
                               "rdma-core's udev rules give the node that mode; or run as a user allowed to "
                               "open it"));
}

Verdict loopback_without_gid(const BindFacts& f) {
  const auto instead = rdma_addresses(f.inventory);
  return verdict("loopback_address", ExitCode::cause_found,
                 f.target.host + " is a loopback address: no RDMA device has a GID for it, so " + f.refusal->call +
                     " has no device",
                 next_step(instead.empty() ? "give an RDMA device's netdev an address, and use that address"
                                           : "use an address served by RDMA here: " + join(instead)));
}

// ---- The bind said EADDRNOTAVAIL: the address is not this host's ----

// Whether the address belongs here is the operator's call: bind one of this host's, or add it
// to the RDMA netdev (named when there is one).
std::string not_local_next(const Target& target, const Inventory& inventory) {
  const auto netdevs = rdma_netdevs(inventory);
  const auto addresses = rdma_addresses(inventory);
  std::string next = addresses.empty() ? std::string("bind an address of this host")
                                       : "bind an address served by RDMA here (" + join(addresses) + ")";
  if (netdevs.size() == 1) {
    next += fmt::format(", or, if {} should be this host's, add it: ip addr add {}/{} dev {}", target.host, target.host,
                        target.family == AF_INET6 ? 64 : 24, netdevs.front());
  }
  return next;
}

// The route is the operator's to choose: a local subnet on the RDMA netdev, or a gateway.
std::string no_route_next(const Target& target, const Inventory& inventory) {
  const auto netdevs = rdma_netdevs(inventory);
  const auto netdev = netdevs.size() == 1 ? netdevs.front() : std::string("NETDEV");
  return fmt::format(
      "give {} an address in {}'s subnet, or add a route through your gateway: ip route add {} via "
      "GATEWAY dev {}",
      netdev, target.host, target.host, netdev);
}

Verdict not_local(const BindFacts& f, const std::string& why) {
  auto v = verdict("address_not_local", ExitCode::cause_found,
                   f.target.host +
                       " is not assigned to any netdev on this host, so binding it fails with "
                       "EADDRNOTAVAIL" +
                       why,
                   next_step(not_local_next(f.target, f.inventory)));
  add_instead(f.inventory, v);
  return v;
}

bool resolve_says(const BindFacts& f, std::initializer_list<int> errnums) {
  return f.stage == Stage::remote && failed(f.resolve) && is_one_of(f.resolve->errnum, errnums);
}

Verdict unroutable(const BindFacts& f) {
  return verdict("no_route", ExitCode::cause_found,
                 f.target.host + " is not local and there is no route to it (rdma_resolve_addr: ENETUNREACH)",
                 next_step(no_route_next(f.target, f.inventory)));
}

Verdict no_answer(const BindFacts& f) {
  return not_local(f, fmt::format("; as a destination, address resolution got no answer ({}){}",
                                  errno_name(f.resolve->errnum), f.egress ? " on " + f.egress->name : std::string()));
}

Verdict resolves_elsewhere(const BindFacts& f) {
  return not_local(f, fmt::format("; as a destination it resolves through {} port {}, so a client on this host can "
                                  "connect to it",
                                  f.attempt.device, f.attempt.port));
}

// ---- ENODEV because the GID the kernel looks for is not in the table ----

bool holds_gid(const std::vector<GidEntry>& gids, const std::string& address) {
  const auto wanted = gid_for_address(address);
  return std::ranges::any_of(gids, [&wanted](const GidEntry& entry) { return canonical(entry.gid) == wanted; });
}

bool link_local_address(const std::string& address) {
  GidEntry entry;
  entry.gid = address;
  return is_link_local(entry);
}

// A destination whose route leaves by a netdev where the port has only link-local GIDs: the
// source the kernel picks (another netdev's address, or one behind a gateway) has no GID
// there, and the fe80 one cannot carry the packet past the link.
bool route_only_link_local(const BindFacts& f) {
  return f.stage == Stage::refused && !f.target.loopback && !link_local_address(f.target.host) &&
         !f.route_gids.empty() && std::ranges::all_of(f.route_gids, is_link_local) &&
         !holds_gid(f.route_gids, f.attempt.route_source);
}

std::vector<std::string> gid_texts(const std::vector<GidEntry>& gids) {
  std::vector<std::string> texts;
  texts.reserve(gids.size());
  for (const auto& entry : gids) texts.push_back(entry.gid);
  return texts;
}

std::string entries_text(const std::vector<GidEntry>& gids) {
  std::vector<std::string> texts;
  texts.reserve(gids.size());
  for (const auto& entry : gids) texts.push_back(entry_text(entry));
  return join(texts, ", ");
}

Verdict gid_link_local(const BindFacts& f) {
  const auto& route_netdev = f.attempt.route_netdev;
  const auto& gateway = f.attempt.route_gateway;
  const auto& source = f.attempt.route_source;
  const auto* source_netdev = source.empty() ? nullptr : netdev_owning(f.inventory, source);
  const auto path = gateway.empty() ? std::string() : " via " + gateway;
  const auto from = source.empty() ? std::string("the kernel picks no source address for it")
                    : source_netdev == nullptr
                        ? fmt::format("the source the kernel picks, {}, has no GID on that port", source)
                        : fmt::format("the source the kernel picks, {} (on {}), has no GID on that port", source,
                                      source_netdev->name);
  auto v = verdict(
      "gid_link_local", ExitCode::cause_found,
      fmt::format("the route to {} leaves by {}{} ({} port {}), whose only GID{} there {} link-local ({}), which no "
                  "router forwards, and {}: {} fails with ENODEV",
                  f.target.host, route_netdev, path, f.route_port.device->name, f.route_port.port->number,
                  f.route_gids.size() == 1 ? "" : "s", f.route_gids.size() == 1 ? "is" : "are",
                  join(gid_texts(f.route_gids)), from, f.refusal->call),
      next_step(fmt::format(
          "give {} a routable address of the fabric's plan and route {} from it: ip addr add ADDRESS/LEN dev {}, "
          "then ip {}route replace PREFIX{} dev {} src ADDRESS for the route to {} that 'ip {}route show dev {}' "
          "lists; then '{} --gids ADDRESS' names the GID index the stacks that take one need",
          route_netdev, f.target.host, route_netdev, f.target.family == AF_INET6 ? "-6 " : "", path, route_netdev,
          f.target.host, f.target.family == AF_INET6 ? "-6 " : "", route_netdev, f.siblings.diag_bind())));
  v.details.push_back(fmt::format("{} port {} on {}: {}", f.route_port.device->name, f.route_port.port->number,
                                  route_netdev, entries_text(f.route_gids)));
  return v;
}

// The address whose GID the refused call looked for: the bound one, or a destination's source.
const std::string& gid_address(const BindFacts& f) {
  return f.refusal->call == "rdma_bind_addr" ? f.target.host : f.attempt.route_source;
}

// The ports that carry the netdev the address is on (GIDs there, or a device made on it),
// none of which holds the address's GID; empty when one does or none carries it.
std::vector<PortRef<KernelDevice>> ports_missing_gid(const BindFacts& f) {
  if (f.stage != Stage::refused || f.refused_on == nullptr || f.target.loopback) return {};
  const auto& address = gid_address(f);
  if (address.empty()) return {};
  const auto& route_netdev = f.attempt.route_netdev;
  if (f.refusal->call != "rdma_bind_addr" && !route_netdev.empty() && route_netdev != f.refused_on->name) return {};
  auto ports = ports_serving(f.inventory, "", f.refused_on->name);
  const bool held =
      std::ranges::any_of(ports, [&address](const auto& ref) { return holds_gid(ref.port->gids, address); });
  return held ? decltype(ports){} : ports;
}

bool gid_missing_applies(const BindFacts& f) {
  return !ports_missing_gid(f).empty();
}

// The table length libibverbs reports for a port, 0 when unknown.
int gid_table_len(const Inventory& inventory, const KernelDevice& device, int port) {
  const auto* user = user_view_of(inventory, device);
  if (user == nullptr) return 0;
  const auto it = std::ranges::find(user->ports, port, &UserPort::number);
  return it == user->ports.end() ? 0 : it->gid_table_len;
}

Verdict gid_missing(const BindFacts& f) {
  const auto ref = ports_missing_gid(f).front();
  const auto& device = *ref.device;
  const auto& port = *ref.port;
  const auto& netdev = *f.refused_on;
  const auto& address = gid_address(f);
  const auto used = port.gids.size();
  const auto length = gid_table_len(f.inventory, device, port.number);
  const bool full = length > 0 && used >= static_cast<std::size_t>(length);
  const auto table = full         ? fmt::format("its GID table is full ({} of {} entries)", used, length)
                     : length > 0 ? fmt::format("{} of its {} GID entries are in use", used, length)
                                  : fmt::format("{} GID entries are in use", used);
  const auto whose =
      address == f.target.host ? address : fmt::format("{}, the source it routes {} from,", address, f.target.host);
  auto v = verdict(
      "gid_missing", ExitCode::cause_found,
      fmt::format("{} is on {}, which carries {} port {}, yet that port has no GID entry for it ({}), "
                  "so {} fails with ENODEV; {}",
                  whose, netdev.name, device.name, port.number, gid_for_address(address), f.refusal->call, table));
  const auto remedy = gid_missing_remedy(netdev, address, device.name,
                                         full         ? Room::none
                                         : length > 0 ? Room::some
                                                      : Room::unknown);
  v.fix = remedy.fix;
  v.next = remedy.next;
  v.details.push_back(fmt::format("{} has {} address(es)", netdev.name, netdev.addresses.size()));
  return v;
}

// ---- The rules, in the order they are tried ----

using BindRule = Rule<BindFacts, Verdict>;

constexpr BindRule bind_rules[] = {
    {"not_recorded", [](const BindFacts& f) { return f.stage == Stage::not_recorded; },
     [](const BindFacts& f) { return unknown(f.siblings, "no attempt was recorded"); }},
    // librdmacm could not start.
    {"no_rdma_core", [](const BindFacts& f) { return channel_enodev(f) && !f.inventory.rdma_core_present; },
     no_rdma_core},
    {"no_kernel_device", [](const BindFacts& f) { return channel_enodev(f) && f.inventory.kernel_devices.empty(); },
     no_kernel_device},
    {"providers_missing",
     [](const BindFacts& f) { return no_user_devices(f) && !devices_without_provider(f.inventory).empty(); },
     providers_missing},
    {"uverbs_out_of_reach",
     [](const BindFacts& f) { return no_user_devices(f) && !uverbs_reach(f.inventory).hidden.empty(); },
     uverbs_out_of_reach},
    {"user_space_lists_none", no_user_devices, user_space_lists_none},
    {"channel_enodev", channel_enodev,
     [](const BindFacts& f) {
       return unknown(f.siblings,
                      "rdma_create_event_channel failed with ENODEV although devices are visible to libibverbs");
     }},
    {"rdma_cm_missing", [](const BindFacts& f) { return cm_node_refused(f) && !f.inventory.rdma_cm.exists; },
     rdma_cm_missing},
    {"rdma_cm_closed", [](const BindFacts& f) { return cm_node_refused(f) && f.inventory.rdma_cm.access_errno != 0; },
     rdma_cm_closed},
    {"channel_failed", [](const BindFacts& f) { return f.stage == Stage::channel_failed; },
     [](const BindFacts& f) {
       return unknown(f.siblings, "rdma_create_event_channel failed: " + errno_text(f.channel->errnum));
     }},
    {"id_failed", [](const BindFacts& f) { return f.stage == Stage::id_failed; },
     [](const BindFacts& f) { return unknown(f.siblings, "rdma_create_id failed: " + errno_text(f.id->errnum)); }},
    // No address: librdmacm starts; can we register memory?
    {"host_registration", [](const BindFacts& f) { return f.stage == Stage::host_only && failed(f.registration); },
     registration_failed},
    {"host_usable", [](const BindFacts& f) { return f.stage == Stage::host_only; }, host_usable},
    // ENODEV: no device for the address.
    {"gid_link_local", route_only_link_local, gid_link_local},
    {"no_netdev", [](const BindFacts& f) { return refused_without_port(f) && f.refused_on == nullptr; },
     [](const BindFacts& f) {
       return unknown(f.siblings, f.refusal->call + " failed with ENODEV and no netdev on this host owns or routes " +
                                      f.target.host);
     }},
    {"netdev_without_rdma", refused_without_port, netdev_without_rdma},
    {"provider_missing_for",
     [](const BindFacts& f) { return refused_unseen(f) && !has_provider(f.inventory, *f.serving.front().device); },
     provider_missing_for},
    {"unmatched_in_user_space", refused_unseen, unmatched_in_user_space},
    {"device_unopened",
     [](const BindFacts& f) {
       return f.stage == Stage::refused && f.serving_user != nullptr && f.serving_user->open_errno != 0;
     },
     device_unopened},
    {"loopback_without_gid", [](const BindFacts& f) { return f.stage == Stage::refused && f.target.loopback; },
     loopback_without_gid},
    {"gid_missing", gid_missing_applies, gid_missing},
    {"refused", [](const BindFacts& f) { return f.stage == Stage::refused; },
     [](const BindFacts& f) {
       return unknown(f.siblings,
                      fmt::format("{} failed with ENODEV although {} serves {} in both kernel and user-space views",
                                  f.refusal->call, f.serving.front().device->name, f.target.host));
     }},
    // EADDRNOTAVAIL: not this host's address; as a destination?
    {"not_resolved", [](const BindFacts& f) { return f.stage == Stage::remote && f.resolve == nullptr; },
     [](const BindFacts& f) { return not_local(f, ""); }},
    {"no_route", [](const BindFacts& f) { return resolve_says(f, {ENETUNREACH}); }, unroutable},
    {"remote_no_subnet_manager", without_subnet_manager, no_subnet_manager},
    {"remote_pkey_mismatch", [](const BindFacts& f) { return f.stage == Stage::remote && outside_partition(f); },
     pkey_mismatch},
    {"unanswered",
     [](const BindFacts& f) {
       return resolve_says(f, {ETIMEDOUT, EHOSTUNREACH, EADDRNOTAVAIL});
     },
     no_answer},
    {"resolve_failed", [](const BindFacts& f) { return f.stage == Stage::remote && failed(f.resolve); },
     [](const BindFacts& f) {
       return unknown(f.siblings, "rdma_resolve_addr failed: " + errno_text(f.resolve->errnum));
     }},
    {"no_path_record", path_record_failed, no_path_record},
    {"route_failed", [](const BindFacts& f) { return f.stage == Stage::remote && failed(f.route); },
     [](const BindFacts& f) {
       return unknown(f.siblings, "rdma_resolve_route failed: " + errno_text(f.route->errnum));
     }},
    {"remote_port_not_active", [](const BindFacts& f) { return f.stage == Stage::remote && f.port_inactive(); },
     port_not_active},
    {"resolves_elsewhere", [](const BindFacts& f) { return f.stage == Stage::remote; }, resolves_elsewhere},
    // The bind failed another way, or was not tried.
    {"bind_failed", [](const BindFacts& f) { return f.stage == Stage::bind_failed; },
     [](const BindFacts& f) { return unknown(f.siblings, "rdma_bind_addr failed: " + errno_text(f.bind->errnum)); }},
    {"not_bound", [](const BindFacts& f) { return f.stage == Stage::not_bound; },
     [](const BindFacts& f) { return unknown(f.siblings, "the bind was not attempted"); }},
    // The bind worked: to which device, and does the rest work?
    {"wildcard_registration",
     [](const BindFacts& f) { return f.stage == Stage::bound && f.target.wildcard && failed(f.registration); },
     registration_failed},
    {"wildcard", [](const BindFacts& f) { return f.stage == Stage::bound && f.target.wildcard; }, wildcard},
    {"loopback", [](const BindFacts& f) { return f.stage == Stage::bound && f.target.loopback; }, loopback},
    {"no_device_attached", [](const BindFacts& f) { return f.stage == Stage::bound && f.attempt.device.empty(); },
     [](const BindFacts& f) {
       return unknown(f.siblings, "the bind worked but attached no device to a specific address");
     }},
    {"no_subnet_manager", without_subnet_manager, no_subnet_manager},
    {"port_not_active", [](const BindFacts& f) { return f.stage == Stage::bound && f.port_inactive(); },
     port_not_active},
    {"pkey_mismatch", [](const BindFacts& f) { return f.stage == Stage::bound && outside_partition(f); },
     pkey_mismatch},
    {"registration", [](const BindFacts& f) { return f.stage == Stage::bound && failed(f.registration); },
     registration_failed},
    {"several_devices",
     [](const BindFacts& f) { return f.stage == Stage::bound && f.inventory.kernel_devices.size() > 1; },
     several_devices},
    // Every stage above ends in a rule of its own: only a usable bind is left.
    {"usable", [](const BindFacts&) { return true; }, bound_usable},
};

}  // namespace

Verdict diagnose(const Target& target, const Inventory& inventory, const Attempt& attempt,
                 const SiblingNames& siblings) {
  const BindFacts facts(target, inventory, attempt, siblings);
  // The last rule fits whatever is left, so one always does.
  Verdict result = first_match(bind_rules, facts)->make(facts);
  add_warnings(inventory, result);
  return result;
}

}  // namespace rdmakit::diag
