#include "lib/diag/address_choice.hpp"

#include <algorithm>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "lib/diag/host_queries.hpp"

namespace rdmakit::diag {

namespace {

constexpr int port_active = 4;

// IPv4 first: RoCE v2 over IPv4 is what most fabrics run, and rdma_cm's IPv4 path is
// the one every peer supports; link-local IPv6 needs a scope and is skipped.
std::optional<std::string> address_of(const Netdev& netdev) {
  std::optional<std::string> ipv6;
  for (const auto& with_prefix : netdev.addresses) {
    auto host = without_prefix(with_prefix);
    if (host.find(':') == std::string::npos) return host;
    if (!ipv6 && !host.starts_with("fe80")) ipv6 = host;
  }
  return ipv6;
}

// The netdevs a port carries traffic over: those its GIDs name, then the device's parent.
std::vector<std::string> netdevs_of(const KernelDevice& device, const KernelPort& port) {
  std::vector<std::string> names;
  auto add = [&](const std::string& name) {
    if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  };
  for (const auto& gid : port.gids) add(gid.netdev);
  add(device.parent_netdev);
  return names;
}

std::optional<AddressChoice> first_active_port(const Inventory& inventory, const KernelDevice& device) {
  for (const auto& port : device.ports) {
    if (port.state_code != port_active) continue;
    for (const auto& name : netdevs_of(device, port)) {
      const auto* netdev = netdev_named(inventory, name);
      if (netdev == nullptr) continue;
      if (const auto address = address_of(*netdev)) {
        return AddressChoice{
            .address = *address, .how = fmt::format("{} port {} ({})", device.name, port.number, name), .problem = {}};
      }
    }
  }
  return std::nullopt;
}

AddressChoice of_netdev(const Inventory& inventory, const std::string& name) {
  const auto* netdev = netdev_named(inventory, name);
  if (netdev == nullptr) return {.address = {}, .how = {}, .problem = fmt::format("no netdev named {}", name)};
  if (const auto address = address_of(*netdev)) {
    return {.address = *address, .how = fmt::format("the first address of {}", name), .problem = {}};
  }
  return {.address = {}, .how = {}, .problem = fmt::format("{} has no address", name)};
}

}  // namespace

AddressChoice choose_address(const Inventory& inventory, const std::string& netdev, const std::string& device) {
  if (!netdev.empty()) return of_netdev(inventory, netdev);
  if (!device.empty()) {
    const auto* named = device_named(inventory, device);
    if (named == nullptr) return {.address = {}, .how = {}, .problem = fmt::format("no RDMA device named {}", device)};
    if (auto choice = first_active_port(inventory, *named)) return *choice;
    return {
        .address = {}, .how = {}, .problem = fmt::format("{} has no ACTIVE port on a netdev with an address", device)};
  }
  for (const auto& candidate : inventory.kernel_devices) {
    if (auto choice = first_active_port(inventory, candidate)) {
      choice->how += ", the first ACTIVE port with an address";
      return *choice;
    }
  }
  return {.address = {},
          .how = {},
          .problem = inventory.kernel_devices.empty()
                         ? "no RDMA device"
                         : "no RDMA device has an ACTIVE port on a netdev with an address"};
}

std::vector<AddressChoice> every_port_address(const Inventory& inventory) {
  std::vector<AddressChoice> choices;
  for (const auto& device : inventory.kernel_devices) {
    for (const auto& port : device.ports) {
      for (const auto& name : netdevs_of(device, port)) {
        const auto* netdev = netdev_named(inventory, name);
        const auto address = netdev != nullptr ? address_of(*netdev) : std::nullopt;
        if (!address || std::ranges::any_of(choices, [&](const AddressChoice& c) { return c.address == *address; })) {
          continue;
        }
        choices.push_back({.address = *address,
                           .how = fmt::format("{} port {} ({}, {})", device.name, port.number, name, port.state),
                           .problem = {}});
      }
    }
  }
  return choices;
}

}  // namespace rdmakit::diag
