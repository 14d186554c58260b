#include "lib/diag/host_queries.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/base/report.hpp"
#include "lib/net/ip_address.hpp"

namespace rdmakit::diag {

std::string without_prefix(const std::string& address) {
  return address.substr(0, address.find('/'));
}

std::string human_bytes(std::uint64_t bytes) {
  if (bytes >= (1ULL << 30) && bytes % (1ULL << 30) == 0) return fmt::format("{} GiB", bytes >> 30);
  if (bytes >= (1ULL << 20) && bytes % (1ULL << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (1ULL << 10) && bytes % (1ULL << 10) == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} bytes", bytes);
}

std::string errno_text(int errnum) {
  return fmt::format("{} ({})", errno_name(errnum), std::strerror(errnum));
}

std::string index_text(const std::optional<int>& index) {
  return index ? std::to_string(*index) : "?";
}

// The user-space provider library libibverbs needs for a kernel driver.
std::string provider_for(const std::string& driver) {
  static const std::pair<const char*, const char*> table[] = {
      {"rdma_rxe", "rxe"},      {"siw", "siw"},       {"mlx5_core", "mlx5"}, {"mlx4_core", "mlx4"},
      {"bnxt_en", "bnxt_re"},   {"irdma", "irdma"},   {"ice", "irdma"},      {"i40e", "irdma"},
      {"efa", "efa"},           {"qede", "qedr"},     {"hfi1", "hfi1verbs"}, {"vmw_pvrdma", "vmw_pvrdma"},
      {"hns3", "hns"},          {"erdma", "erdma"},   {"mana", "mana"},      {"cxgb4", "cxgb4"},
      {"ib_qib", "ipathverbs"}, {"ocrdma", "ocrdma"}, {"ib_mthca", "mthca"}};
  for (const auto& [kernel, provider] : table) {
    if (driver == kernel) {
      return provider;
    }
  }
  return {};
}

bool has_provider(const Inventory& inventory, const KernelDevice& device) {
  const auto provider = provider_for(device.driver);
  if (provider.empty()) {
    return true;  // unknown driver: do not accuse the provider
  }
  const auto& drivers = inventory.provider_drivers;
  return std::find(drivers.begin(), drivers.end(), provider) != drivers.end();
}

const UserDevice* user_view_of(const Inventory& inventory, const KernelDevice& device) {
  for (const auto& user : inventory.user_devices) {
    // librdmacm matches by GUID, and by index where both sides know it.
    if (user.node_guid == device.node_guid && (!user.index || !device.index || *user.index == *device.index)) {
      return &user;
    }
  }
  return nullptr;
}

int active_mtu(const Inventory& inventory, const std::string& device, int port) {
  for (const auto& user : inventory.user_devices) {
    if (user.name != device) continue;
    const auto it = std::ranges::find(user.ports, port, &UserPort::number);
    if (it != user.ports.end()) return it->active_mtu;
  }
  return 0;
}

// Addresses on netdevs that have an RDMA device: what the user could bind instead.
std::vector<std::string> rdma_addresses(const Inventory& inventory) {
  std::vector<std::string> addresses;
  for (const auto& name : rdma_netdevs(inventory)) {
    if (const auto* netdev = netdev_named(inventory, name)) {
      for (const auto& address : netdev->addresses) {
        const auto host = without_prefix(address);
        if (!host.starts_with("fe80")) addresses.push_back(host);
      }
    }
  }
  return addresses;
}

std::string pkey_text(int pkey) {
  return fmt::format("{:#06x}", pkey);
}

std::string pkeys_text(const std::vector<std::uint16_t>& pkeys) {
  std::vector<std::string> texts;
  texts.reserve(pkeys.size());
  for (const auto pkey : pkeys) texts.push_back(pkey_text(pkey));
  return texts.empty() ? "none" : join(texts);
}

std::optional<int> membership(const std::vector<std::uint16_t>& pkeys, int pkey) {
  std::optional<int> found;
  for (const int entry : pkeys) {
    if (partition_of(entry) != partition_of(pkey)) continue;
    if (!found || full_member(entry)) found = entry;
  }
  return found;
}

// An IPoIB netdev's 20-byte hardware address ("00:00:10:49:fe:80:...:3d:7a") is its QP
// number's flags and number, then the GID of the IB port it runs on: the one link between
// the two that sysfs gives (IB GIDs name no netdev). "" for any other address.
std::string ipoib_port_gid(const std::string& hardware_address) {
  std::string hex;
  for (const char c : hardware_address) {
    if (c != ':') hex.push_back(c);
  }
  constexpr std::size_t ipoib_address_digits = 40;
  if (hex.size() != ipoib_address_digits) return {};
  return gid_text(std::string_view(hex).substr(ipoib_address_digits - 32));
}

std::string port_guid_of(const std::string& gid) {
  const auto address = IpAddress::parse(gid, MappedAddress::kept);
  if (!address || address->family != AF_INET6) return {};
  std::string guid = "0x";
  for (std::size_t i = 8; i < 16; ++i) guid += fmt::format("{:02x}", address->bytes[i]);
  return guid;
}

std::string subnet_manager_next_step(const std::string& device, int port) {
  return fmt::format(
      "run a subnet manager on one host of this fabric ('apt install opensm' and 'systemctl start "
      "opensm' there) or enable the switch's; 'ibstat {} {}' then shows State: Active and a non-zero "
      "SM lid",
      device, port);
}

std::string partition_next_step(const std::string& guid, int partition) {
  return fmt::format(
      "on the subnet manager, make port {} a full member of partition {} (opensm: a line such as "
      "'p{:x}=0x{:04x}, ipoib : {}=full ;' in /etc/opensm/partitions.conf, then 'systemctl reload "
      "opensm')",
      guid.empty() ? "(its GUID: ibstat)" : guid, pkey_text(partition), partition, partition | 0x8000,
      guid.empty() ? "PORT_GUID" : guid);
}

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (const auto& item : items) {
    out += (out.empty() ? "" : separator) + item;
  }
  return out;
}

std::string use_instead(const Inventory& inventory) {
  const auto addresses = rdma_addresses(inventory);
  return addresses.empty() ? std::string() : "addresses served by RDMA here: " + join(addresses);
}

// The first up Ethernet netdev with an address: where a soft-RoCE device could go.
const Netdev* rxe_candidate(const Inventory& inventory) {
  for (const auto& netdev : inventory.netdevs) {
    if (netdev.type == "ether" && netdev.up && !netdev.addresses.empty()) return &netdev;
  }
  return nullptr;
}

std::string rxe_link_command(const std::string& netdev) {
  return fmt::format("rdma link add rxe_{} type rxe netdev {}", netdev, netdev);
}

std::string efa_next_step(const std::string& device, const std::string& netdev) {
  return fmt::format(
      "{} is EFA, which rdma_cm does not drive (no RoCE or InfiniBand addressing): test it with libfabric "
      "(fi_pingpong -p efa); to try the rdma_cm tools on {}, a soft-RoCE device: {}",
      device, netdev, rxe_link_command(netdev));
}

bool KernelModules::has(std::string_view module) const {
  return std::find(available.begin(), available.end(), module) != available.end();
}

const Step* Attempt::find(std::string_view call) const {
  // The last one: a call may be tried twice (bind, then bind on a fresh id).
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (it->call == call) return &*it;
  }
  return nullptr;
}

Target make_target(const std::string& numeric_host, std::uint16_t port, const std::string& port_space) {
  Target target;
  target.port = port;
  target.port_space = port_space;
  if (numeric_host.empty()) {
    return target;
  }
  // As written: rdma_cm resolves ::ffff:10.0.0.1 as IPv6.
  const auto address = IpAddress::parse(strip_scope(numeric_host), MappedAddress::kept);
  if (!address) throw UsageError("'" + numeric_host + "' is not a numeric IPv4 or IPv6 address");
  target.family = address->family;
  target.wildcard = address->is_wildcard();
  if (address->family == AF_INET) {
    target.loopback = address->bytes[0] == 127;
  } else {
    std::array<std::uint8_t, 16> one{};
    one[15] = 1;
    target.loopback = address->bytes == one;
  }
  target.host = canonical(numeric_host);
  if (numeric_host.find('%') != std::string::npos) {
    target.host += numeric_host.substr(numeric_host.find('%'));
  }
  return target;
}

std::string gid_text(std::string_view sysfs_gid) {
  std::array<unsigned char, 16> bytes{};
  std::string hex;
  for (char c : sysfs_gid) {
    if (c != ':') hex.push_back(c);
  }
  // Anything but 32 hex digits is shown as it is: stoul would throw on "zz" and read "0x" or "-1" as numbers.
  if (hex.size() != 32 ||
      !std::all_of(hex.begin(), hex.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; })) {
    return std::string(sysfs_gid);
  }
  for (std::size_t i = 0; i < 16; ++i) {
    bytes[i] = static_cast<unsigned char>(std::stoul(hex.substr(i * 2, 2), nullptr, 16));
  }
  IpAddress address{.family = AF_INET6, .bytes = {}};
  std::copy(bytes.begin(), bytes.end(), address.bytes.begin());
  return address.to_string();
}

const Netdev* netdev_owning(const Inventory& inventory, const std::string& numeric_host) {
  return netdev_with_address(inventory, numeric_host);
}

bool address_is_local(const Inventory& inventory, const std::string& numeric_host) {
  return netdev_owning(inventory, numeric_host) != nullptr;
}

}  // namespace rdmakit::diag
