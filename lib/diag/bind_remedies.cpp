#include "lib/diag/bind_remedies.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/diag/host_queries.hpp"
#include "lib/net/ip_address.hpp"

namespace rdmakit::diag {

namespace {

// On a host with a NIC, its driver is the answer; soft-RoCE is for testing.
constexpr std::string_view nic_driver_instead =
    "with an RDMA NIC, load its driver instead of rdma_rxe (mlx5_ib, irdma, bnxt_re, ...)";

// Soft-RoCE on an Ethernet netdev; for any other, an address on an RDMA netdev.
// A NIC whose RDMA device shares the netdev's PCI function but has no RoCE GID at all: RoCE
// is switched off there (mlx5's devlink enable_roce), and a soft-RoCE device is not the fix.
// (A device with RoCE GIDs on other netdevs of its function, such as switchdev representors,
// is not this.)
std::optional<Remedy> roce_disabled_remedy(const Inventory& inventory, const Netdev& netdev) {
  if (netdev.bus_device.empty()) return std::nullopt;
  for (const auto& device : inventory.kernel_devices) {
    const bool roce_gids = std::ranges::any_of(device.ports, [](const KernelPort& port) {
      return std::ranges::any_of(port.gids, [](const GidEntry& gid) { return !gid.netdev.empty(); });
    });
    if (device.bus_device != netdev.bus_device || roce_gids) continue;
    const auto pci = "pci/" + netdev.bus_device;
    return next_step(
        device.driver == "mlx5_core"
            ? fmt::format("{} and {} are one NIC (PCI {}), and {} has no RoCE GID on {}: RoCE is disabled there. "
                          "'devlink dev param show {} name enable_roce'; to enable it, 'devlink dev param set {} name "
                          "enable_roce value true cmode driverinit' and 'devlink dev reload {}'",
                          netdev.name, device.name, netdev.bus_device, device.name, netdev.name, pci, pci, pci)
            : fmt::format("{} and {} are one NIC (PCI {}), and {} has no RoCE GID on {}: RoCE is off on it; see "
                          "how driver {} enables it",
                          netdev.name, device.name, netdev.bus_device, device.name, netdev.name, device.driver));
  }
  return std::nullopt;
}

std::optional<Remedy> efa_remedy(const Inventory& inventory, const Netdev& netdev) {
  for (const auto& device : inventory.kernel_devices) {
    if (device.driver == "efa") return next_step(efa_next_step(device.name, netdev.name));
  }
  return std::nullopt;
}

const DeviceNode* node_at(const Inventory& inventory, const std::string& path) {
  const auto node = std::ranges::find(inventory.uverbs_nodes, path, &DeviceNode::path);
  return node == inventory.uverbs_nodes.end() ? nullptr : &*node;
}

// The address as the netdev holds it, with its prefix length ("10.58.2.10/16").
std::string with_prefix(const Netdev& netdev, const std::string& address) {
  const auto wanted = canonical(address);
  const auto it = std::ranges::find_if(
      netdev.addresses, [&wanted](const std::string& own) { return canonical(without_prefix(own)) == wanted; });
  return it == netdev.addresses.end() ? address : *it;
}

// An IPv4 address with its prefix length as the netdev lists it ("10.58.2.10/16").
struct Ipv4Interface {
  IpAddress address;
  Cidr subnet;
};
std::optional<Ipv4Interface> ipv4_interface(const std::string& text) {
  const auto subnet = Cidr::read(text);
  const auto address = IpAddress::parse(without_prefix(text));
  if (!subnet || !address || address->family != AF_INET) return std::nullopt;
  return Ipv4Interface{*address, *subnet};
}

// An IPv4 address listed first of its subnet on the netdev, with others of the subnet after it:
// the kernel's primary, and deleting it deletes those secondaries too (unless
// promote_secondaries is set), so deleting and re-adding it is no fix.
bool takes_secondaries(const Netdev& netdev, const std::string& address) {
  const auto own = ipv4_interface(with_prefix(netdev, address));
  if (!own) return false;
  bool seen = false;
  for (const auto& other : netdev.addresses) {
    const auto each = ipv4_interface(other);
    if (!each || each->subnet != own->subnet) continue;
    if (each->address == own->address) {
      seen = true;
    } else {
      return seen;
    }
  }
  return false;
}

}  // namespace

Remedy command(std::string fix, std::string next) {
  return Remedy{std::move(fix), std::move(next)};
}

Remedy next_step(std::string next) {
  return Remedy{{}, std::move(next)};
}

// A loopback address's way out: one of the addresses RDMA serves here, checked the same way.
std::string loopback_instead(const Inventory& inventory) {
  const auto addresses = rdma_addresses(inventory);
  if (addresses.empty()) return "use an address on an RDMA netdev";
  return "use an address RDMA serves here instead, such as " + addresses.front();
}

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

bool module_loaded(const Inventory& inventory, std::string_view module) {
  return std::ranges::find(inventory.modules, module) != inventory.modules.end();
}

Remedy rxe_remedy(const Inventory& inventory, const Netdev& netdev) {
  if (auto disabled = roce_disabled_remedy(inventory, netdev)) return *disabled;
  if (auto efa = efa_remedy(inventory, netdev)) return *efa;
  if (netdev.type != "ether") return next_step("use an address on a netdev that belongs to an RDMA device");
  const bool load = inventory.kernel_modules.has("rdma_rxe") && !module_loaded(inventory, "rdma_rxe");
  return command((load ? "modprobe rdma_rxe && " : "") + rxe_link_command(netdev.name),
                 "that makes a soft-RoCE device on " + netdev.name +
                     "; on a RoCE NIC, use an address on the netdev of its port instead");
}

UverbsReach uverbs_reach(const Inventory& inventory) {
  UverbsReach reach;
  for (const auto& device : inventory.kernel_devices) {
    if (device.uverbs.empty()) {
      reach.hidden.push_back(device.name + " has no uverbs device (is ib_uverbs loaded?)");
      reach.without_uverbs = true;
      continue;
    }
    const auto path = "/dev/infiniband/" + device.uverbs;
    const auto* node = node_at(inventory, path);
    if (node == nullptr || !node->exists) {
      reach.hidden.push_back(device.name + ": " + path + " does not exist in this mount namespace");
      reach.absent_nodes.push_back(path);
    } else if (node->access_errno != 0) {
      reach.hidden.push_back(device.name + ": " + path + " is not accessible (" + errno_name(node->access_errno) + ")");
      reach.closed_nodes.push_back(path);
    }
  }
  return reach;
}

Remedy uverbs_remedy(const UverbsReach& reach) {
  Remedy remedy;
  if (reach.without_uverbs) {
    remedy.fix = "modprobe ib_uverbs";
  } else if (!reach.closed_nodes.empty()) {
    remedy.fix = "chmod 666 " + join(reach.closed_nodes, " ");
    remedy.next = "rdma-core's udev rules give these nodes that mode; or run as a user allowed to open them";
  }
  if (!reach.absent_nodes.empty()) {
    std::string devices;
    for (const auto& node : reach.absent_nodes) devices += " --device " + node;
    remedy.next =
        "in a container, pass the host's nodes in (docker run --device /dev/infiniband/rdma_cm" + devices + " ...)";
  }
  return remedy;
}

// The kernel adds a GID when an address is added: re-adding the address is the fix where the
// table has room and the delete takes nothing else with it.
Remedy gid_missing_remedy(const Netdev& netdev, const std::string& address, const std::string& device, Room room) {
  const auto readd =
      fmt::format("ip addr del {0} dev {1} && ip addr add {0} dev {1}", with_prefix(netdev, address), netdev.name);
  const auto free_entries = fmt::format(
      "remove the addresses of {0} that RDMA does not need (each takes one entry per RoCE type; 'ip -br addr show dev "
      "{0}' lists them) with ip addr del ADDRESS/LEN dev {0} (not the first of a subnet: that deletes the rest of it)",
      netdev.name);
  const auto primary =
      takes_secondaries(netdev, address)
          ? fmt::format(
                " ({} is the first address of its subnet on {}: deleting it deletes the others of the subnet "
                "unless net.ipv4.conf.{}.promote_secondaries=1)",
                address, netdev.name, netdev.name)
          : std::string();
  if (room == Room::some && primary.empty()) {
    return command(readd, "connections over " + address + " drop meanwhile");
  }
  if (room == Room::none) {
    return next_step(fmt::format("free entries: {}, then re-add {} so the kernel gives it a GID: {}{}", free_entries,
                                 address, readd, primary));
  }
  return next_step(
      fmt::format("re-add {} so the kernel gives it a GID: {}{}; if the table is full ('ibv_devinfo -v "
                  "-d {}' shows gid_tbl_len), first {}",
                  address, readd, primary, device, free_entries));
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
    if (!user_view_of(inventory, device) && !inventory.user_devices.empty()) {
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

}  // namespace rdmakit::diag
