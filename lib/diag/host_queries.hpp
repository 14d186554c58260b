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

#include "lib/core/gid.hpp"
#include "lib/diag/connect_diagnosis.hpp"
#include "lib/diag/diagnosis.hpp"

namespace rdmakit::diag {

// A locked-memory limit below this fails send_bw's sweeps up to 8 MiB.
constexpr std::uint64_t recommended_memlock = 64ULL << 20;

std::string without_prefix(const std::string& address);

std::string human_bytes(std::uint64_t bytes);

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

template <typename Device>
bool holds_gid_on(const Device& device, const std::string& netdev) {
  return std::ranges::any_of(device.ports, [&netdev](const auto& port) {
    return std::ranges::any_of(port.gids, [&netdev](const GidEntry& gid) { return gid.netdev == netdev; });
  });
}

// The first RDMA device on a netdev: made on it, or holding a GID on it.
template <typename Host>
auto rdma_device_on(const Host& host, const std::string& netdev) {
  const auto& devices = devices_of(host);
  const auto it = std::ranges::find_if(devices, [&netdev](const auto& device) {
    return !netdev.empty() && (device_netdev(device) == netdev || holds_gid_on(device, netdev));
  });
  return it == devices.end() ? nullptr : &*it;
}

// The netdevs that have an RDMA device, in the devices' order, each once.
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
  const auto serves = [&gid, &netdev](const GidEntry& entry) {
    return (!gid.empty() && entry.gid == gid) || (!netdev.empty() && entry.netdev == netdev);
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

// ---- diag-bind's model only ----

// Addresses on netdevs that have an RDMA device: what the user could bind instead.
std::vector<std::string> rdma_addresses(const Inventory& inventory);

std::string join(const std::vector<std::string>& items, const std::string& separator = ", ");

std::string use_instead(const Inventory& inventory);

// The first up Ethernet netdev with an address: where a soft-RoCE device could go.
const Netdev* rxe_candidate(const Inventory& inventory);

std::string rxe_link_command(const std::string& netdev);

}  // namespace rdmakit::diag
