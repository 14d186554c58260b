#pragma once
// Queries on the host model (lib/diag/diagnosis.hpp) that the verdicts and the reports
// share: which device, port or netdev serves what, and the words for bytes and errnos.
// Internal to lib/diag/.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <ranges>
#include <string>
#include <utility>
#include <vector>

#include "lib/diag/connect_diagnosis.hpp"
#include "lib/diag/diagnosis.hpp"
#include "lib/rdma/gid.hpp"

namespace rdmakit::diag {

// A locked-memory limit below this fails send_bw's sweeps up to 8 MiB.
constexpr std::uint64_t recommended_memlock = 64ULL << 20;

std::string without_prefix(const std::string& address);

std::string human_bytes(std::uint64_t bytes);

// An IPoIB netdev's 20-byte hardware address ("00:00:10:49:fe:80:...:3d:7a") holds the GID of
// the IB port it runs on: the one link sysfs gives between the two (IB GIDs name no netdev).
// "" for any other address.
std::string ipoib_port_gid(const std::string& hardware_address);

std::string errno_text(int errnum);

// A device index as the reports show it: "?" when unknown.
std::string index_text(const std::optional<int>& index);

// The user-space provider library libibverbs needs for a kernel driver.
std::string provider_for(const std::string& driver);

bool has_provider(const Inventory& inventory, const KernelDevice& device);

const UserDevice* user_view_of(const Inventory& inventory, const KernelDevice& device);

// ---- Lookups both host models answer the same way: diag-bind's Inventory and diag-connect's
// HostView. Written once over either: a netdev has `name` and `addresses`, a device `ports`
// holding `gids`, and the netdev it was made on (`device_netdev`).

inline const std::vector<Netdev>& netdevs_of(const Inventory& inventory) {
  return inventory.netdevs;
}
inline const std::vector<ViewNetdev>& netdevs_of(const HostView& view) {
  return view.netdevs;
}
inline const std::vector<KernelDevice>& devices_of(const Inventory& inventory) {
  return inventory.kernel_devices;
}
inline const std::vector<ViewDevice>& devices_of(const HostView& view) {
  return view.devices;
}
// The netdev a soft-RoCE or iWARP device was created on, "" when the model does not say.
inline const std::string& device_netdev(const KernelDevice& device) {
  return device.parent_netdev;
}
inline const std::string& device_netdev(const ViewDevice& device) {
  return device.netdev;
}

// Every device's ports, in the model's order, as advise_gid takes them.
template <typename Host>
std::vector<GidPort> gid_ports(const Host& host) {
  std::vector<GidPort> ports;
  for (const auto& device : devices_of(host)) {
    for (const auto& port : device.ports)
      ports.push_back({.device = device.name, .port = port.number, .gids = port.gids});
  }
  return ports;
}

template <typename Host>
auto netdev_named(const Host& host, const std::string& name) {
  const auto& netdevs = netdevs_of(host);
  const auto it = std::ranges::find_if(netdevs, [&name](const auto& netdev) { return netdev.name == name; });
  return it == netdevs.end() ? nullptr : &*it;
}

// The netdev holding the address, however either is spelled; none for "".
template <typename Host>
auto netdev_with_address(const Host& host, const std::string& address) {
  const auto& netdevs = netdevs_of(host);
  const auto wanted = address.empty() ? std::string() : canonical(address);
  const auto holds = [&wanted](const auto& netdev) {
    return std::ranges::any_of(netdev.addresses,
                               [&wanted](const std::string& own) { return canonical(without_prefix(own)) == wanted; });
  };
  const auto it = address.empty() ? netdevs.end() : std::ranges::find_if(netdevs, holds);
  return it == netdevs.end() ? nullptr : &*it;
}

// The GID of the IB port an IPoIB netdev runs on, "" for any other netdev. A port's GIDs name
// one IPoIB netdev (the parent, ib0); its P_Key children (ib0.8001) share the GID.
inline std::string ipoib_gid_of(const Netdev& netdev) {
  return netdev.ipoib_gid;
}
inline std::string ipoib_gid_of(const ViewNetdev& netdev) {
  return netdev.pkey >= 0 ? ipoib_port_gid(netdev.mac) : std::string();
}

// Whether a GID entry serves the netdev: it names it, or it is the port GID of that IPoIB netdev.
template <typename Host>
auto gid_serves(const Host& host, const std::string& netdev) {
  const auto* named = netdev_named(host, netdev);
  const auto ipoib_gid = named != nullptr ? ipoib_gid_of(*named) : std::string();
  return [netdev, ipoib_gid](const GidEntry& entry) {
    return !netdev.empty() && (entry.netdev == netdev || (!ipoib_gid.empty() && entry.gid == ipoib_gid));
  };
}

// The first RDMA device on a netdev: made on it, or holding a GID on it.
template <typename Host>
auto rdma_device_on(const Host& host, const std::string& netdev) {
  const auto& devices = devices_of(host);
  const auto serves = gid_serves(host, netdev);
  const auto it = std::ranges::find_if(devices, [&netdev, &serves](const auto& device) {
    return !netdev.empty() &&
           (device_netdev(device) == netdev || std::ranges::any_of(device.ports, [&serves](const auto& port) {
              return std::ranges::any_of(port.gids, serves);
            }));
  });
  return it == devices.end() ? nullptr : &*it;
}

// The netdevs that have an RDMA device, in the devices' order, each once; then IPoIB P_Key
// children, whose port GID names their parent.
template <typename Host>
std::vector<std::string> rdma_netdevs(const Host& host) {
  std::vector<std::string> names;
  const auto add = [&names](const std::string& name) {
    if (!name.empty() && std::ranges::find(names, name) == names.end()) names.push_back(name);
  };
  for (const auto& device : devices_of(host)) {
    add(device_netdev(device));
    for (const auto& port : device.ports) {
      for (const auto& gid : port.gids) add(gid.netdev);
    }
  }
  for (const auto& netdev : netdevs_of(host)) {
    if (!ipoib_gid_of(netdev).empty() && rdma_device_on(host, netdev.name) != nullptr) add(netdev.name);
  }
  return names;
}

// A device and one of its ports, in either model; port is null when the device has none that fits.
template <typename Device>
struct PortRef {
  const Device* device = nullptr;
  const std::ranges::range_value_t<decltype(Device::ports)>* port = nullptr;
};

template <typename Host>
using DeviceOf = std::ranges::range_value_t<decltype(devices_of(std::declval<const Host&>()))>;

template <typename Host>
const DeviceOf<Host>* device_named(const Host& host, const std::string& name) {
  const auto& devices = devices_of(host);
  const auto it = std::ranges::find_if(devices, [&name](const auto& device) { return device.name == name; });
  return it == devices.end() ? nullptr : &*it;
}

// The IB port an IPoIB netdev runs on (a P_Key child's is its parent's): the one holding its
// hardware address's GID; none for any other netdev.
template <typename Host, typename NetdevOfHost>
PortRef<DeviceOf<Host>> ipoib_port(const Host& host, const NetdevOfHost& netdev) {
  const auto gid = ipoib_gid_of(netdev);
  for (const auto& device : devices_of(host)) {
    for (const auto& port : device.ports) {
      const auto holds = [&gid](const GidEntry& entry) { return entry.gid == gid; };
      if (!gid.empty() && std::ranges::any_of(port.gids, holds)) return {&device, &port};
    }
  }
  return {};
}

// The device named so, and its port of that number when it has one.
template <typename Host>
PortRef<DeviceOf<Host>> port_named(const Host& host, const std::string& device_name, int number) {
  const auto* device = device_named(host, device_name);
  if (device == nullptr) return {};
  const auto it = std::ranges::find_if(device->ports, [number](const auto& port) { return port.number == number; });
  return {device, it == device->ports.end() ? nullptr : &*it};
}

// The ports holding a GID for the address or a GID on the netdev, and every port of a device
// made on the netdev; in the devices' order. Either may be "".
template <typename Host>
std::vector<PortRef<DeviceOf<Host>>> ports_serving(const Host& host, const std::string& address,
                                                   const std::string& netdev) {
  std::vector<PortRef<DeviceOf<Host>>> found;
  const auto gid = address.empty() ? std::string() : gid_for_address(address);
  const auto on_netdev = gid_serves(host, netdev);
  const auto serves = [&gid, &on_netdev](const GidEntry& entry) {
    return (!gid.empty() && entry.gid == gid) || on_netdev(entry);
  };
  for (const auto& device : devices_of(host)) {
    const bool made_on = !netdev.empty() && device_netdev(device) == netdev;
    for (const auto& port : device.ports) {
      if (made_on || std::ranges::any_of(port.gids, serves)) found.push_back({&device, &port});
    }
  }
  return found;
}

// The active MTU libibverbs reports for a device's port, 0 when it does not.
int active_mtu(const Inventory& inventory, const std::string& device, int port);

// ---- InfiniBand partitions ----
// A P_Key's low 15 bits name its partition and the top bit full membership: two limited
// members of one partition cannot talk to each other.
constexpr int partition_of(int pkey) {
  return pkey & 0x7fff;
}
constexpr bool full_member(int pkey) {
  return (pkey & 0x8000) != 0;
}
std::string pkey_text(int pkey);                                  // "0x8001"
std::string pkeys_text(const std::vector<std::uint16_t>& pkeys);  // "0xffff, 0x8001", or "none"
// The port's P_Key table entry for the partition of `pkey` (a full membership before a limited
// one): what the subnet manager granted the port; none when the port is no member.
std::optional<int> membership(const std::vector<std::uint16_t>& pkeys, int pkey);
// The port GUID in an IB GID's low 64 bits, as opensm's partitions.conf names ports
// ("0xb8599f0300c53d7a"); "" for text that is no GID.
std::string port_guid_of(const std::string& gid);

// The next steps on the subnet manager, worded once for both diagnosers: run one (the port
// then reads Active with an SM LID), or grant the port (its GUID, "" when unknown) `partition`.
std::string subnet_manager_next_step(const std::string& device, int port);
std::string partition_next_step(const std::string& guid, int partition);

// An IB port that trained (phys LinkUp) but that no subnet manager has given a LID: it stays
// INIT, or ARMED, and nothing reaches it. `state` and `phys_state` as sysfs names them.
template <typename Port>
bool awaits_subnet_manager(const Port& port, const std::string& phys_state) {
  return port.link_layer == "InfiniBand" && port.state.find("ACTIVE") == std::string::npos &&
         (port.lid == 0 || port.sm_lid == 0) && (phys_state.empty() || phys_state == "LinkUp");
}

// ---- diag-bind's model only ----

// Addresses on netdevs that have an RDMA device: what the user could bind instead.
std::vector<std::string> rdma_addresses(const Inventory& inventory);

std::string join(const std::vector<std::string>& items, const std::string& separator = ", ");

std::string use_instead(const Inventory& inventory);

// The first up Ethernet netdev with an address: where a soft-RoCE device could go.
const Netdev* rxe_candidate(const Inventory& inventory);

std::string rxe_link_command(const std::string& netdev);

// What to do on a host whose RDMA device is EFA (driver efa) and whose `netdev` has none:
// EFA is driven through libfabric, not rdma_cm (its GIDs are on no netdev, no address binds).
std::string efa_next_step(const std::string& device, const std::string& netdev);

}  // namespace rdmakit::diag
