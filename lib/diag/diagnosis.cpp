#include "lib/diag/diagnosis.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "lib/core/error.hpp"
#include "lib/core/report.hpp"
#include "lib/diag/host_queries.hpp"

namespace rdmakit::diag {

namespace {

// A loopback address's way out: one of the addresses RDMA serves here, checked the same way.
std::string loopback_instead(const Inventory& inventory) {
  const auto addresses = rdma_addresses(inventory);
  if (addresses.empty()) return "use an address on an RDMA netdev";
  return "use an address RDMA serves here instead, such as " + addresses.front();
}

constexpr std::uint64_t recommended_memlock = 64ull << 20;  // enough for send_bw sweeps up to 8 MiB

// What the operator does about a verdict: a command that fixes it here, and/or the next step.
struct Remedy {
  std::string fix;
  std::string next;
};

Remedy command(std::string fix, std::string next = {}) {
  return Remedy{std::move(fix), std::move(next)};
}

Remedy next_step(std::string next) {
  return Remedy{{}, std::move(next)};
}

Verdict verdict(std::string cause, ExitCode exit_code, std::string summary, Remedy remedy = {}) {
  Verdict v;
  v.cause = std::move(cause);
  v.exit_code = exit_code;
  v.summary = std::move(summary);
  v.fix = std::move(remedy.fix);
  v.next = std::move(remedy.next);
  return v;
}

Verdict unknown(std::string summary) {
  return verdict(
      "unknown", ExitCode::unexplained,
      std::move(summary) + "; diag-bind cannot name the cause: the inventory and attempt above are the raw data",
      next_step("compare 'rdma link show' and 'ibv_devinfo' (the kernel's and libibverbs' views) with the "
                "inventory above, and rerun with --log-level debug"));
}

// On a host with a NIC, its driver is the answer; soft-RoCE is for testing.
constexpr std::string_view nic_driver_instead =
    "with an RDMA NIC, load its driver instead of rdma_rxe (mlx5_ib, irdma, bnxt_re, ...)";

// No device at all: load the modules and make a soft-RoCE device where this kernel has them,
// or say that it has none (a kernel without RDMA, as in many containers and cloud images).
Remedy no_device_remedy(const Inventory& inventory) {
  const auto& modules = inventory.kernel_modules;
  if (modules.known && !modules.has("rdma_rxe")) {
    return next_step(
        fmt::format("this kernel ({}) has no rdma_rxe module under /lib/modules/{}: in a container, load "
                    "the RDMA modules on the host; otherwise boot a kernel with RDMA (Debian's "
                    "linux-image-amd64 has rdma_rxe), or run the tools under soft-RoCE in a VM "
                    "(rdmakit-rxe-vm, package rdmakit-rxe-vm)",
                    modules.release, modules.release));
  }
  const auto* candidate = rxe_candidate(inventory);
  if (candidate == nullptr) {
    return command("modprobe -a ib_uverbs rdma_ucm rdma_rxe",
                   fmt::format("{}; soft-RoCE needs an Ethernet netdev that is up with an address, then: rdma link "
                               "add rxe0 type rxe netdev NETDEV",
                               nic_driver_instead));
  }
  return command("modprobe -a ib_uverbs rdma_ucm rdma_rxe && " + rxe_link_command(candidate->name),
                 std::string(nic_driver_instead));
}

// rdma_create_event_channel failed: librdmacm could not start at all.
// NOLINTNEXTLINE(readability-function-cognitive-complexity): 55 today, above the cap of 25; to split
Verdict channel_failure(const Inventory& inventory, const Step& step) {
  if (step.errnum == ENODEV) {
    if (!inventory.rdma_core_present) {
      return verdict("no_rdma_device", ExitCode::cause_found,
                     "this kernel has no RDMA core loaded (no /sys/class/infiniband), so there is no device at all "
                     "(rdma_create_event_channel: ENODEV)",
                     no_device_remedy(inventory));
    }
    if (inventory.kernel_devices.empty()) {
      auto v = verdict("no_rdma_device", ExitCode::cause_found,
                       "the kernel has no RDMA device at all, so librdmacm finds nothing to work with "
                       "(rdma_create_event_channel: ENODEV)",
                       no_device_remedy(inventory));
      if (const auto* candidate = rxe_candidate(inventory)) {
        v.details.push_back("no RDMA NIC driver is bound; soft-RoCE (rxe) can run on " + candidate->name +
                            " for testing");
      }
      return v;
    }
    if (inventory.user_devices.empty()) {
      std::vector<std::string> without_provider;
      for (const auto& device : inventory.kernel_devices) {
        if (!has_provider(inventory, device)) {
          without_provider.push_back(fmt::format("{} (driver {}, needs provider lib{}-rdmav*.so)", device.name,
                                                 device.driver, provider_for(device.driver)));
        }
      }
      if (!without_provider.empty()) {
        auto v = verdict("provider_missing", ExitCode::cause_found,
                         "the kernel has " + std::to_string(inventory.kernel_devices.size()) +
                             " RDMA device(s) but libibverbs lists none: no user-space provider library for " +
                             join(without_provider),
                         command("apt-get install ibverbs-providers",
                                 "in a container image, check that " +
                                     (inventory.provider_dir.empty() ? std::string("the libibverbs provider directory")
                                                                     : inventory.provider_dir) +
                                     " and /etc/libibverbs.d are present"));
        return v;
      }
      std::vector<std::string> hidden;
      std::vector<std::string> absent_nodes;  // in this mount namespace: a container's
      std::vector<std::string> closed_nodes;  // there, but not for this user
      bool without_uverbs = false;
      for (const auto& device : inventory.kernel_devices) {
        if (device.uverbs.empty()) {
          hidden.push_back(device.name + " has no uverbs device (is ib_uverbs loaded?)");
          without_uverbs = true;
          continue;
        }
        const auto path = "/dev/infiniband/" + device.uverbs;
        const auto node = std::find_if(inventory.uverbs_nodes.begin(), inventory.uverbs_nodes.end(),
                                       [&](const DeviceNode& n) { return n.path == path; });
        if (node == inventory.uverbs_nodes.end() || !node->exists) {
          hidden.push_back(device.name + ": " + path + " does not exist in this mount namespace");
          absent_nodes.push_back(path);
        } else if (node->access_errno != 0) {
          hidden.push_back(device.name + ": " + path + " is not accessible (" + errno_name(node->access_errno) + ")");
          closed_nodes.push_back(path);
        }
      }
      if (!hidden.empty()) {
        Remedy remedy;
        if (without_uverbs) {
          remedy.fix = "modprobe ib_uverbs";
        } else if (!closed_nodes.empty()) {
          remedy.fix = "chmod 666 " + join(closed_nodes, " ");
          remedy.next = "rdma-core's udev rules give these nodes that mode; or run as a user allowed to open them";
        }
        if (!absent_nodes.empty()) {
          std::string devices;
          for (const auto& node : absent_nodes) devices += " --device " + node;
          remedy.next = "in a container, pass the host's nodes in (docker run --device /dev/infiniband/rdma_cm" +
                        devices + " ...)";
        }
        return verdict("uverbs_unavailable", ExitCode::cause_found,
                       "the kernel has the RDMA device but user space cannot reach it: " + join(hidden, "; "),
                       std::move(remedy));
      }
      return verdict("userspace_mismatch", ExitCode::cause_found,
                     "the kernel lists " + std::to_string(inventory.kernel_devices.size()) +
                         " RDMA device(s), libibverbs lists none, and neither a missing provider nor a missing "
                         "uverbs node explains it",
                     next_step("run 'IBV_SHOW_WARNINGS=1 ibv_devices' to see what libibverbs rejects"));
    }
    return unknown("rdma_create_event_channel failed with ENODEV although devices are visible to libibverbs");
  }
  if (step.errnum == ENOENT || step.errnum == EACCES || step.errnum == EPERM || step.errnum == ENXIO ||
      step.errnum == ENOSYS) {
    const bool module_loaded =
        std::find(inventory.modules.begin(), inventory.modules.end(), "rdma_ucm") != inventory.modules.end();
    if (!inventory.rdma_cm.exists) {
      return verdict("rdma_cm_missing", ExitCode::cause_found,
                     module_loaded ? "/dev/infiniband/rdma_cm does not exist although rdma_ucm is loaded (a container "
                                     "or a /dev without udev)"
                                   : "/dev/infiniband/rdma_cm does not exist: the rdma_ucm module is not loaded",
                     module_loaded ? command("mkdir -p /dev/infiniband && mknod -m 666 /dev/infiniband/rdma_cm c 10 "
                                             "\"$(cut -d: -f2 /sys/class/misc/rdma_cm/dev)\"",
                                             "in a container, pass the host's node in instead (docker run --device "
                                             "/dev/infiniband/rdma_cm ...)")
                                   : command("modprobe rdma_ucm"));
    }
    if (inventory.rdma_cm.access_errno != 0) {
      return verdict("rdma_cm_permission", ExitCode::cause_found,
                     "/dev/infiniband/rdma_cm exists (" + inventory.rdma_cm.mode + ") but this user may not open it (" +
                         errno_name(inventory.rdma_cm.access_errno) + ")",
                     command("chmod 666 /dev/infiniband/rdma_cm",
                             "rdma-core's udev rules give the node that mode; or run as a user allowed to open it"));
    }
  }
  return unknown("rdma_create_event_channel failed: " + errno_text(step.errnum));
}

// Bind or resolve gave ENODEV although the address is usable by IP: which side refused?
// NOLINTNEXTLINE(readability-function-cognitive-complexity): 38 today, above the cap of 25; to split
Verdict no_device_for(const Target& target, const Inventory& inventory, const Step& step, const Netdev* netdev) {
  const auto host = target.host;
  const auto serving = ports_serving(inventory, host, netdev ? netdev->name : std::string());
  if (serving.empty()) {
    if (!netdev) {
      return unknown(step.call + " failed with ENODEV and no netdev on this host owns or routes " + host);
    }
    auto v = verdict("netdev_without_rdma", ExitCode::cause_found,
                     step.call == "rdma_bind_addr"
                         ? fmt::format("{} is on {}, and no RDMA device has a GID on {}: the kernel has no device "
                                       "to bind it to",
                                       host, netdev->name, netdev->name)
                         : fmt::format("{} is reached through {}, and no RDMA device has a GID on {}: the kernel has "
                                       "no device to send from",
                                       host, netdev->name, netdev->name),
                     netdev->type == "ether"
                         ? command((inventory.kernel_modules.has("rdma_rxe") &&
                                            std::find(inventory.modules.begin(), inventory.modules.end(), "rdma_rxe") ==
                                                inventory.modules.end()
                                        ? "modprobe rdma_rxe && "
                                        : "") +
                                       rxe_link_command(netdev->name),
                                   "that makes a soft-RoCE device on " + netdev->name +
                                       "; on a RoCE NIC, use an address on the netdev of its port instead")
                         : next_step("use an address on a netdev that belongs to an RDMA device"));
    if (auto instead = use_instead(inventory); !instead.empty()) {
      v.details.push_back(instead);
    }
    return v;
  }
  const auto& device = *serving.front().device;
  const auto* user = user_view_of(inventory, device);
  if (!user) {
    if (!has_provider(inventory, device)) {
      return verdict("provider_missing", ExitCode::cause_found,
                     fmt::format("the kernel binds {} to {} (GUID {}), but libibverbs has no provider for driver {} so "
                                 "librdmacm cannot match the device",
                                 host, device.name, device.node_guid, device.driver),
                     command("apt-get install ibverbs-providers"));
    }
    std::vector<std::string> seen;
    for (const auto& other : inventory.user_devices) {
      seen.push_back(fmt::format("{} GUID {} index {}", other.name, other.node_guid,
                                 other.index ? std::to_string(*other.index) : "?"));
    }
    return verdict("userspace_mismatch", ExitCode::cause_found,
                   fmt::format("the kernel binds {} to {} (GUID {}, index {}), but libibverbs does not list a device "
                               "with that GUID/index (it lists: {}); librdmacm then fails with ENODEV",
                               host, device.name, device.node_guid, device.index ? std::to_string(*device.index) : "?",
                               seen.empty() ? "none" : join(seen)),
                   next_step("expose the same devices to user space as the kernel has (a container's device list, "
                             "RDMAV_DRIVERS or IBV_* in the environment, a stale /sys bind mount)"));
  }
  if (user->open_errno != 0) {
    const auto path = "/dev/infiniband/" + device.uverbs;
    std::string node_state;
    for (const auto& node : inventory.uverbs_nodes) {
      if (node.path == path) {
        node_state = !node.exists ? " (the node does not exist)"
                     : node.access_errno
                         ? fmt::format(" ({} is {}: {} for this user)", path, node.mode, errno_name(node.access_errno))
                         : "";
      }
    }
    const bool node_absent = node_state == " (the node does not exist)";
    return verdict("uverbs_unavailable", ExitCode::cause_found,
                   fmt::format("{} is on {}, which libibverbs lists but cannot open (ibv_open_device: {}){}", host,
                               device.name, errno_name(user->open_errno), node_state),
                   node_absent
                       ? next_step("in a container, pass the host's node in (docker run --device " + path + " ...)")
                       : command("chmod 666 " + path,
                                 "rdma-core's udev rules give the node that mode; or run as a user allowed to "
                                 "open it"));
  }
  if (target.loopback) {
    const auto instead = rdma_addresses(inventory);
    return verdict("loopback_address", ExitCode::cause_found,
                   host + " is a loopback address: no RDMA device has a GID for it, so " + step.call + " has no device",
                   next_step(instead.empty() ? "give an RDMA device's netdev an address, and use that address"
                                             : "use an address served by RDMA here: " + join(instead)));
  }
  return unknown(fmt::format("{} failed with ENODEV although {} serves {} in both kernel and user-space views",
                             step.call, device.name, host));
}

void add_mapping_details(const Target& target, const Inventory& inventory, const Attempt& attempt, Verdict& v) {
  const auto* device = kernel_device(inventory, attempt.device);
  if (!device) {
    return;
  }
  const auto* port = kernel_port(*device, attempt.port);
  const auto gid = gid_for_address(target.host);
  std::vector<std::string> indices;
  std::optional<int> v2_index;
  std::string netdev;
  if (port) {
    for (const auto& entry : port->gids) {
      if (entry.gid == gid) {
        indices.push_back(fmt::format("{} ({})", entry.index, entry.type));
        if (entry.type == "RoCE v2" && !v2_index) v2_index = entry.index;
        netdev = entry.netdev;
      }
    }
  }
  v.details.push_back(fmt::format("{} maps to {} port {}{}{}", target.host, device->name, attempt.port,
                                  netdev.empty() ? "" : " (netdev " + netdev + ")",
                                  indices.empty() ? "" : ", GID index " + join(indices)));
  if (v2_index) {
    v.details.push_back(fmt::format("a RoCE v2 peer reaches it with GID index {} (perftest: -d {} -x {})", *v2_index,
                                    device->name, *v2_index));
  }
}

// The port behind the bound device must be ACTIVE for anything after the bind to work.
std::optional<Verdict> port_problem(const Target& target, const Inventory& inventory, const Attempt& attempt) {
  const auto* device = kernel_device(inventory, attempt.device);
  const auto* port = device ? kernel_port(*device, attempt.port) : nullptr;
  if (!port || port->state_code == 4 || port->state_code == 5) {
    return std::nullopt;
  }
  std::string netdev_name = device->parent_netdev;
  for (const auto& entry : port->gids) {
    if (!entry.netdev.empty()) netdev_name = entry.netdev;
  }
  const auto* netdev = netdev_named(inventory, netdev_name);
  if (netdev && !netdev->up) {
    return verdict("netdev_down", ExitCode::cause_found,
                   fmt::format("{} binds to {} port {}, but its netdev {} is administratively down, so the port is {} "
                               "({}): connections will time out",
                               target.host, device->name, port->number, netdev->name, port->state, port->phys_state),
                   command("ip link set " + netdev->name + " up"));
  }
  return verdict(
      "port_not_active", ExitCode::cause_found,
      fmt::format("{} binds to {} port {}, but the port is {} ({}){}: connections will time out", target.host,
                  device->name, port->number, port->state, port->phys_state,
                  port->link_layer == "InfiniBand" ? "; an IB port needs a subnet manager to become ACTIVE"
                                                   : "; check the cable/switch port"),
      next_step(port->link_layer == "InfiniBand"
                    ? fmt::format("start a subnet manager (opensm) on the fabric, then check 'ibstat {}'", device->name)
                : netdev ? fmt::format("check the link: 'ip link show {}' and 'ethtool {}' (cable, switch port)",
                                       netdev->name, netdev->name)
                         : fmt::format("check the link: 'rdma link show {}/{}'", device->name, port->number)));
}

// ulimit raises the soft limit as far as the hard one; beyond it, only the limits files do.
Remedy memlock_remedy(const Memlock& m) {
  constexpr std::string_view lasting =
      "to keep it: memlock in /etc/security/limits.conf for a login, LimitMEMLOCK=infinity for a service";
  if (!m.hard_bytes) return command("ulimit -l unlimited", std::string(lasting));
  if (*m.hard_bytes >= recommended_memlock) {
    return command(fmt::format("ulimit -l {}", *m.hard_bytes / 1024), std::string(lasting));
  }
  return next_step(
      fmt::format("the hard limit is {} too: raise it as root, memlock in /etc/security/limits.conf for a "
                  "login, LimitMEMLOCK=infinity for a service",
                  human_bytes(*m.hard_bytes)));
}

std::optional<Verdict> registration_problem(const Attempt& attempt, const Inventory& inventory) {
  const auto* reg = attempt.find("ibv_reg_mr");
  if (!reg || reg->ok()) {
    return std::nullopt;
  }
  if (reg->errnum == ENOMEM || reg->errnum == EPERM || reg->errnum == EAGAIN) {
    const auto& m = inventory.memlock;
    return verdict(
        "memlock_too_low", ExitCode::cause_found,
        fmt::format("the bind works, but registering {} fails with {}: the locked-memory limit is {}{}", reg->subject,
                    errno_name(reg->errnum), m.soft_bytes ? human_bytes(*m.soft_bytes) : std::string("unlimited"),
                    m.cap_ipc_lock ? "" : " and this process lacks CAP_IPC_LOCK"),
        memlock_remedy(m));
  }
  return unknown("ibv_reg_mr failed: " + errno_text(reg->errnum));
}

void add_warnings(const Inventory& inventory, Verdict& v) {
  const auto& m = inventory.memlock;
  if (m.soft_bytes && *m.soft_bytes < recommended_memlock && !m.cap_ipc_lock) {
    v.warnings.push_back(
        fmt::format("locked-memory limit is {}: registrations beyond it fail (send_bw sweeps need "
                    "about {}); raise it with ulimit -l",
                    human_bytes(*m.soft_bytes), human_bytes(recommended_memlock)));
  }
  for (const auto& device : inventory.kernel_devices) {
    const auto* user = user_view_of(inventory, device);
    if (!user && !inventory.user_devices.empty()) {
      v.warnings.push_back(device.name + " is in the kernel but not in libibverbs' list");
    }
  }
  for (const auto& user : inventory.user_devices) {
    for (const auto& device : inventory.kernel_devices) {
      if (user.node_guid == device.node_guid && user.index && device.index && *user.index != *device.index) {
        v.warnings.push_back(fmt::format("{}: user-space index {} differs from the kernel's {}", device.name,
                                         *user.index, *device.index));
      }
    }
  }
}

Verdict usable(const Target& target, const Inventory& inventory, const Attempt& attempt) {
  if (auto problem = port_problem(target, inventory, attempt)) {
    return *problem;
  }
  if (auto problem = registration_problem(attempt, inventory)) {
    return *problem;
  }
  const auto* device = kernel_device(inventory, attempt.device);
  const std::string device_name = device ? device->name : attempt.device;
  Verdict v;
  if (inventory.kernel_devices.size() > 1) {
    v = verdict("several_devices", ExitCode::ok,
                fmt::format("the bind works: of {} RDMA devices, {} belongs to {} port {}",
                            inventory.kernel_devices.size(), target.host, device_name, attempt.port));
    std::vector<std::string> others;
    for (const auto& other : inventory.kernel_devices) {
      if (other.name != device_name) others.push_back(other.name);
    }
    v.details.push_back("tools that take a device name need -d " + device_name + " for this address (not " +
                        join(others) + ")");
  } else {
    v = verdict("ok", ExitCode::ok,
                fmt::format("the bind works: {} belongs to {} port {}", target.host, device_name, attempt.port));
  }
  add_mapping_details(target, inventory, attempt, v);
  return v;
}

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

Verdict diagnose_remote(const Target& target, const Inventory& inventory, const Attempt& attempt) {
  const auto* resolve = attempt.find("rdma_resolve_addr");
  const auto* route = attempt.find("rdma_resolve_route");
  const auto instead = use_instead(inventory);
  auto not_local = [&](const std::string& why) {
    auto v = verdict("address_not_local", ExitCode::cause_found,
                     target.host +
                         " is not assigned to any netdev on this host, so binding it fails with "
                         "EADDRNOTAVAIL" +
                         why,
                     next_step(not_local_next(target, inventory)));
    if (!instead.empty()) v.details.push_back(instead);
    return v;
  };
  if (!resolve) {
    return not_local("");
  }
  const Netdev* egress = attempt.route_source.empty() ? nullptr : netdev_owning(inventory, attempt.route_source);
  if (!resolve->ok()) {
    switch (resolve->errnum) {
      case ENODEV: return no_device_for(target, inventory, *resolve, egress);
      case ENETUNREACH:
        return verdict("no_route", ExitCode::cause_found,
                       target.host + " is not local and there is no route to it (rdma_resolve_addr: ENETUNREACH)",
                       next_step(no_route_next(target, inventory)));
      case ETIMEDOUT:
      case EHOSTUNREACH:
      case EADDRNOTAVAIL:
        return not_local(fmt::format("; as a destination, address resolution got no answer ({}){}",
                                     errno_name(resolve->errnum), egress ? " on " + egress->name : std::string()));
      default: return unknown("rdma_resolve_addr failed: " + errno_text(resolve->errnum));
    }
  }
  if (route && !route->ok()) {
    if (route->errnum == ENODEV) {
      return no_device_for(target, inventory, *route, egress);
    }
    return unknown("rdma_resolve_route failed: " + errno_text(route->errnum));
  }
  if (auto problem = port_problem(target, inventory, attempt)) {
    return *problem;
  }
  return not_local(
      fmt::format("; as a destination it resolves through {} port {}, so a client on this host can "
                  "connect to it",
                  attempt.device, attempt.port));
}

}  // namespace

// NOLINTNEXTLINE(readability-function-cognitive-complexity): 64 today, above the cap of 25; to split
std::vector<Check> assess(const Inventory& inv) {
  std::vector<Check> checks;
  {
    std::vector<std::string> names;
    for (const auto& d : inv.kernel_devices) {
      names.push_back(fmt::format(
          "{} (index {}, GUID {}, driver {}{})", d.name, d.index ? std::to_string(*d.index) : "?", d.node_guid,
          d.driver.empty() ? "?" : d.driver, d.parent_netdev.empty() ? "" : " on " + d.parent_netdev));
    }
    if (!inv.rdma_core_present) {
      checks.push_back(
          {"kernel", "fail", "no /sys/class/infiniband: no RDMA core in this kernel or sysfs not mounted"});
    } else if (names.empty()) {
      checks.push_back({"kernel", "fail", "no RDMA devices"});
    } else {
      checks.push_back({"kernel", "ok", fmt::format("{} device(s): {}", names.size(), join(names))});
    }
  }
  {
    std::vector<std::string> names;
    bool all_open = true;
    for (const auto& d : inv.user_devices) {
      names.push_back(fmt::format("{} (index {}, GUID {}{})", d.name, d.index ? std::to_string(*d.index) : "?",
                                  d.node_guid, d.open_errno ? ", cannot open: " + errno_name(d.open_errno) : ""));
      all_open = all_open && d.open_errno == 0;
    }
    bool mismatch = false;
    for (const auto& d : inv.kernel_devices) {
      mismatch = mismatch || user_view_of(inv, d) == nullptr;
    }
    if (inv.userspace_list_errno != 0) {
      checks.push_back({"user space", "fail", "ibv_get_device_list failed: " + errno_text(inv.userspace_list_errno)});
    } else if (names.empty()) {
      checks.push_back({"user space", inv.kernel_devices.empty() ? "info" : "fail", "libibverbs lists no devices"});
    } else {
      checks.push_back({"user space", mismatch || !all_open ? "fail" : "ok",
                        fmt::format("libibverbs lists {}: {}", names.size(), join(names))});
    }
    std::vector<std::string> missing;
    for (const auto& d : inv.kernel_devices) {
      if (!has_provider(inv, d)) missing.push_back("lib" + provider_for(d.driver) + " for " + d.name);
    }
    checks.push_back({"providers", missing.empty() ? "ok" : "fail",
                      missing.empty() ? fmt::format("{} provider(s) installed{}", inv.provider_drivers.size(),
                                                    inv.provider_dir.empty() ? "" : " in " + inv.provider_dir)
                                      : "missing: " + join(missing)});
  }
  {
    const auto& node = inv.rdma_cm;
    checks.push_back({"rdma_cm", node.exists && node.access_errno == 0 ? "ok" : "fail",
                      !node.exists ? node.path + " missing"
                                   : fmt::format("{} {}{}", node.path, node.mode,
                                                 node.access_errno ? " not accessible: " + errno_name(node.access_errno)
                                                                   : " read/write for us")});
    std::vector<std::string> nodes;
    bool bad = false;
    for (const auto& n : inv.uverbs_nodes) {
      nodes.push_back(
          fmt::format("{} {}{}", n.path, n.mode, n.access_errno ? " (" + errno_name(n.access_errno) + ")" : ""));
      bad = bad || n.access_errno != 0;
    }
    checks.push_back({"uverbs", nodes.empty() ? (inv.kernel_devices.empty() ? "info" : "fail") : (bad ? "fail" : "ok"),
                      nodes.empty() ? "no /dev/infiniband/uverbs* nodes" : join(nodes)});
  }
  {
    const auto has = [&](const char* m) {
      return std::find(inv.modules.begin(), inv.modules.end(), m) != inv.modules.end();
    };
    const bool core = has("ib_core") && has("ib_uverbs") && has("rdma_cm") && has("rdma_ucm");
    checks.push_back(
        {"modules", core ? "ok" : "warn",
         (inv.modules.empty() ? std::string("none loaded") : join(inv.modules, " ")) +
             (core ? "" : " (rdma_ucm is loaded on first use by librdmacm; ib_uverbs is needed for verbs)")});
  }
  {
    const auto& m = inv.memlock;
    const bool low = m.soft_bytes && *m.soft_bytes < recommended_memlock && !m.cap_ipc_lock;
    checks.push_back({"memlock", low ? "warn" : "ok",
                      fmt::format("soft {}, hard {}{}", m.soft_bytes ? human_bytes(*m.soft_bytes) : "unlimited",
                                  m.hard_bytes ? human_bytes(*m.hard_bytes) : "unlimited",
                                  m.cap_ipc_lock ? " (CAP_IPC_LOCK: not enforced)" : "")});
  }
  {
    const auto with_rdma = rdma_netdevs(inv);
    std::vector<std::string> lines;
    for (const auto& n : inv.netdevs) {
      const bool rdma = std::find(with_rdma.begin(), with_rdma.end(), n.name) != with_rdma.end();
      lines.push_back(fmt::format("{} {} {}{}{}", n.name, n.up ? "up" : "DOWN", n.operstate,
                                  n.addresses.empty() ? "" : " " + join(n.addresses, " "), rdma ? " [RDMA]" : ""));
    }
    checks.push_back({"netdevs", "info", join(lines, "; ")});
  }
  return checks;
}

// NOLINTNEXTLINE(readability-function-cognitive-complexity): 42 today, above the cap of 25; to split
Verdict diagnose(const Target& target, const Inventory& inventory, const Attempt& attempt) {
  // NOLINTNEXTLINE(readability-function-cognitive-complexity): 26 today, above the cap of 25; to split
  Verdict result = [&]() -> Verdict {
    const auto* channel = attempt.find("rdma_create_event_channel");
    if (!channel) {
      return unknown("no attempt was recorded");
    }
    if (!channel->ok()) {
      return channel_failure(inventory, *channel);
    }
    if (const auto* id = attempt.find("rdma_create_id"); id && !id->ok()) {
      return unknown("rdma_create_id failed: " + errno_text(id->errnum));
    }
    if (target.host.empty()) {
      auto ok = verdict("ok", ExitCode::ok,
                        fmt::format("librdmacm starts and sees {} device(s); give an address to test a bind",
                                    inventory.user_devices.size()));
      if (auto problem = registration_problem(attempt, inventory)) return *problem;
      return ok;
    }
    const auto* bind = attempt.find("rdma_bind_addr");
    if (bind && !bind->ok()) {
      if (bind->errnum == EADDRNOTAVAIL) {
        return diagnose_remote(target, inventory, attempt);
      }
      if (bind->errnum == ENODEV) {
        return no_device_for(target, inventory, *bind, netdev_owning(inventory, target.host));
      }
      return unknown("rdma_bind_addr failed: " + errno_text(bind->errnum));
    }
    if (!bind) {
      return unknown("the bind was not attempted");
    }
    if (target.wildcard) {
      auto v = verdict("wildcard_address", ExitCode::ok,
                       target.host +
                           " is the wildcard address: the bind works but attaches no device; a listener "
                           "on it accepts on every RDMA device, and each connection gets the device its "
                           "route uses");
      if (auto problem = registration_problem(attempt, inventory)) return *problem;
      if (auto instead = use_instead(inventory); !instead.empty()) v.details.push_back(instead);
      return v;
    }
    if (target.loopback) {
      const auto* route = attempt.find("rdma_resolve_route");
      auto v = verdict(
          "loopback_address", ExitCode::cause_found,
          target.host +
              " is a loopback address: the bind works but attaches no device, and a client "
              "cannot reach it over RoCE" +
              (route && !route->ok() ? " (rdma_resolve_route: " + errno_name(route->errnum) + ")" : std::string()),
          next_step(loopback_instead(inventory)));
      if (auto instead = use_instead(inventory); !instead.empty()) v.details.push_back(instead);
      return v;
    }
    if (attempt.device.empty()) {
      return unknown("the bind worked but attached no device to a specific address");
    }
    return usable(target, inventory, attempt);
  }();
  add_warnings(inventory, result);
  return result;
}

}  // namespace rdmakit::diag
