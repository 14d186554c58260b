#include "lib/diag/host_probe.hpp"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <endian.h>
#include <ifaddrs.h>
#include <linux/capability.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <netdb.h>
#include <rdma/rdma_netlink.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"
#include "lib/base/file_descriptor.hpp"
#include "lib/base/log.hpp"
#include "lib/base/process_limits.hpp"
#include "lib/diag/gid_table.hpp"
#include "lib/diag/netlink.hpp"
#include "lib/diag/routes.hpp"
#include "lib/diag/sysfs.hpp"
#include "lib/rdma/addressing.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/rdma/verbs.hpp"
#include "lib/tool/attached_diagnosis.hpp"

namespace rdmakit::diag {

namespace fs = std::filesystem;

namespace {

std::string guid_text(__be64 guid) {
  const std::uint64_t value = be64toh(guid);
  return fmt::format("{:04x}:{:04x}:{:04x}:{:04x}", (value >> 48) & 0xffff, (value >> 32) & 0xffff,
                     (value >> 16) & 0xffff, value & 0xffff);
}

const char* port_state_name(ibv_port_state state) {
  switch (state) {
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
    default: return "NOP";
  }
}

void read_user_space(Inventory& inventory) {
  int count = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) {
    inventory.userspace_list_errno = errno ? errno : ENODEV;
    return;
  }
  const std::unique_ptr<ibv_device*, decltype(&ibv_free_device_list)> owner(list, &ibv_free_device_list);
  for (int i = 0; i < count; ++i) {
    UserDevice device;
    device.name = ibv_get_device_name(list[i]);
    device.node_guid = guid_text(ibv_get_device_guid(list[i]));
    if (const int index = ibv_get_device_index(list[i]); index >= 0) {
      device.index = index;
    }
    ibv_context* context = ibv_open_device(list[i]);
    if (context == nullptr) {
      device.open_errno = errno ? errno : EIO;
    } else {
      ibv_device_attr attributes{};
      if (ibv_query_device(context, &attributes) == 0) {
        for (int port = 1; port <= attributes.phys_port_cnt; ++port) {
          ibv_port_attr port_attributes{};
          if (ibv_query_port(context, static_cast<std::uint8_t>(port), &port_attributes) == 0) {
            device.ports.push_back({.number = port,
                                    .state = port_state_name(port_attributes.state),
                                    .active_mtu = static_cast<int>(mtu_bytes(port_attributes.active_mtu)),
                                    .gid_table_len = port_attributes.gid_tbl_len});
          }
        }
      }
      ibv_close_device(context);
    }
    inventory.user_devices.push_back(std::move(device));
  }
}

// Providers are plugins next to libibverbs; a driver counts when its .driver file and its
// library are both there.
void read_providers(Inventory& inventory) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ibv_get_device_list), &info) != 0 && info.dli_fname != nullptr) {
    inventory.provider_dir = (fs::path(info.dli_fname).parent_path() / "libibverbs").string();
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/etc/libibverbs.d", ec)) {
    std::ifstream in(entry.path());
    std::string keyword;
    std::string driver;
    if (!(in >> keyword >> driver) || keyword != "driver") {
      continue;
    }
    bool library_found = false;
    for (const auto& lib : fs::directory_iterator(inventory.provider_dir, ec)) {
      library_found = library_found || lib.path().filename().string().starts_with("lib" + driver + "-rdmav");
    }
    if (library_found) {
      inventory.provider_drivers.push_back(driver);
    }
  }
  std::sort(inventory.provider_drivers.begin(), inventory.provider_drivers.end());
}

DeviceNode device_node(const std::string& path) {
  DeviceNode node;
  node.path = path;
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) {
    return node;
  }
  node.exists = true;
  std::string mode = S_ISCHR(info.st_mode) ? "c" : "-";
  const char* letters = "rwxrwxrwx";
  for (int bit = 8; bit >= 0; --bit) {
    mode.push_back((info.st_mode & (1U << bit)) != 0 ? letters[8 - bit] : '-');
  }
  node.mode = mode;
  node.access_errno = access(path.c_str(), R_OK | W_OK) == 0 ? 0 : errno;
  return node;
}

void read_device_nodes(Inventory& inventory) {
  inventory.rdma_cm = device_node("/dev/infiniband/rdma_cm");
  std::vector<std::string> paths;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/dev/infiniband", ec)) {
    if (entry.path().filename().string().starts_with("uverbs")) paths.push_back(entry.path().string());
  }
  for (const auto& device : inventory.kernel_devices) {
    const auto path = "/dev/infiniband/" + device.uverbs;
    if (!device.uverbs.empty() && std::find(paths.begin(), paths.end(), path) == paths.end()) paths.push_back(path);
  }
  std::sort(paths.begin(), paths.end());
  for (const auto& path : paths) {
    inventory.uverbs_nodes.push_back(device_node(path));
  }
}

void read_memlock(Inventory& inventory) {
  rlimit limit{};
  if (getrlimit(RLIMIT_MEMLOCK, &limit) == 0) {
    if (limit.rlim_cur != RLIM_INFINITY) inventory.memlock.soft_bytes = limit.rlim_cur;
    if (limit.rlim_max != RLIM_INFINITY) inventory.memlock.hard_bytes = limit.rlim_max;
  }
  inventory.memlock.cap_ipc_lock = has_capability(CAP_IPC_LOCK);
}

int prefix_length(const sockaddr* mask) {
  if (mask == nullptr) return 0;
  int bits = 0;
  if (mask->sa_family == AF_INET) {
    bits = std::popcount(reinterpret_cast<const sockaddr_in*>(mask)->sin_addr.s_addr);
  } else if (mask->sa_family == AF_INET6) {
    for (unsigned char byte : reinterpret_cast<const sockaddr_in6*>(mask)->sin6_addr.s6_addr) {
      bits += std::popcount(byte);
    }
  }
  return bits;
}

void read_addresses(Inventory& inventory) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return;
  }
  const std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> owner(list, &freeifaddrs);
  for (auto* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr ||
        (entry->ifa_addr->sa_family != AF_INET && entry->ifa_addr->sa_family != AF_INET6)) {
      continue;
    }
    const auto text =
        fmt::format("{}/{}", rdmakit::address_of(entry->ifa_addr).host_string(), prefix_length(entry->ifa_netmask));
    auto netdev = std::find_if(inventory.netdevs.begin(), inventory.netdevs.end(),
                               [&](const Netdev& n) { return n.name == entry->ifa_name; });
    if (netdev == inventory.netdevs.end()) {
      inventory.netdevs.push_back(Netdev{.name = entry->ifa_name,
                                         .ifindex = static_cast<int>(if_nametoindex(entry->ifa_name)),
                                         .type = {},
                                         .operstate = {},
                                         .up = (entry->ifa_flags & IFF_UP) != 0,
                                         .mtu = 0,
                                         .addresses = {},
                                         .vlan = {},
                                         .ipoib_gid = {},
                                         .bus_device = {}});
      netdev = std::prev(inventory.netdevs.end());
    }
    netdev->addresses.push_back(text);
  }
}

// The VLAN netdevs' ids. The file exists only while the 8021q module is loaded, and without
// it there are no VLAN netdevs.
void read_vlans(Inventory& inventory) {
  std::ifstream file("/proc/net/vlan/config");
  if (!file) return;
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const auto vlans = parse_vlan_config(text);
  for (auto& netdev : inventory.netdevs) {
    if (const auto it = vlans.find(netdev.name); it != vlans.end()) netdev.vlan = it->second;
  }
}

// The source address the kernel's routing picks for a destination (no packet is sent).
std::string route_source(const Target& target) {
  auto destination = parse_address(target.host, target.port);
  if (destination.port() == 0) destination.set_port(9);
  FileDescriptor sock(socket(destination.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (sock.get() < 0 || connect(sock.get(), destination.get(), sizeof destination.storage) != 0) {
    return {};
  }
  SocketAddress source;
  socklen_t length = sizeof source.storage;
  if (getsockname(sock.get(), source.get(), &length) != 0) {
    return {};
  }
  return source.host_string();
}

std::string attached_device(rdma_cm_id* id) {
  return id->verbs != nullptr ? ibv_get_device_name(id->verbs->device) : "";
}

// Waits for the outcome of an asynchronous resolution; returns 0 or the errno it failed with.
int await_resolution(EventChannel& channel, rdma_cm_event_type success, const ProbeOptions& options,
                     const std::string& what) {
  const auto deadline = Clock::now() + options.limits.timeout;
  try {
    for (;;) {
      auto event = next_cm_event(channel, deadline, options.limits.stop_fd, what);
      if (event->event == success) return 0;
      if (event->event == RDMA_CM_EVENT_ADDR_ERROR || event->event == RDMA_CM_EVENT_ROUTE_ERROR) {
        return event->status < 0 ? -event->status : (event->status != 0 ? event->status : EHOSTUNREACH);
      }
    }
  } catch (const RunStopped& stopped) {
    return stopped.reason() == StopReason::timed_out ? ETIMEDOUT : EINTR;
  }
}

void record(Attempt& attempt, const std::string& call, const std::string& subject, int errnum,
            const std::string& detail = {}) {
  attempt.steps.push_back({.call = call, .subject = subject, .errnum = errnum, .detail = detail});
}

// Registers a buffer on the device the cm_id got (or the first one that opens) to test the
// locked-memory limit the way the tools will meet it.
void probe_registration(ibv_context* context, const ProbeOptions& options, Attempt& attempt) {
  const auto subject = fmt::format("{} KiB", options.registration_bytes >> 10);
  try {
    ProtectionDomain pd(context);
    RegisteredBuffer buffer(pd.get(), options.registration_bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    record(attempt, "ibv_reg_mr", subject, 0);
  } catch (const RdmaError& error) {
    record(attempt, error.call(), subject, error.errnum());
  }
}

void probe_first_device(const ProbeOptions& options, Attempt& attempt) {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) return;
  const std::unique_ptr<ibv_device*, decltype(&ibv_free_device_list)> owner(list, &ibv_free_device_list);
  for (int i = 0; i < count; ++i) {
    if (ibv_context* context = ibv_open_device(list[i])) {
      probe_registration(context, options, attempt);
      ibv_close_device(context);
      return;
    }
  }
}

}  // namespace

std::optional<std::map<std::string, int>> rdma_device_indices() {
  std::map<std::string, int> indices;
  const NetlinkRequest request(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET), NLM_F_REQUEST | NLM_F_DUMP);
  const int error = netlink_exchange(NETLINK_RDMA, request, [&](const nlmsghdr& message) {
    std::optional<std::uint32_t> index;
    std::string name;
    for (const auto& attribute : message_attributes(message)) {
      if (attribute.type == RDMA_NLDEV_ATTR_DEV_INDEX) {
        index = attribute.u32();
      } else if (attribute.type == RDMA_NLDEV_ATTR_DEV_NAME) {
        name = attribute.text();
      }
    }
    if (index && !name.empty()) indices[name] = static_cast<int>(*index);
  });
  if (error != 0) return std::nullopt;
  return indices;
}

Inventory collect_inventory(const ProbeOptions& options) {
  Inventory inventory;
  read_sysfs(options.sysfs_root, inventory);
  if (utsname host{}; uname(&host) == 0) inventory.kernel_modules = read_kernel_modules("/lib/modules", host.release);
  const auto indices = rdma_device_indices().value_or(std::map<std::string, int>{});
  inventory.kernel_indices_known = !indices.empty();
  for (auto& device : inventory.kernel_devices) {
    if (const auto it = indices.find(device.name); it != indices.end()) device.index = it->second;
  }
  read_user_space(inventory);
  read_providers(inventory);
  read_device_nodes(inventory);
  read_memlock(inventory);
  read_addresses(inventory);
  read_vlans(inventory);
  return inventory;
}

std::string source_toward(const std::string& numeric_host) {
  return route_source(make_target(numeric_host, 0, "tcp"));
}

Attempt run_attempt(const Target& target, const ProbeOptions& options) {
  Attempt attempt;
  std::unique_ptr<EventChannel> channel;
  try {
    channel = std::make_unique<EventChannel>();
    record(attempt, "rdma_create_event_channel", "", 0);
  } catch (const RdmaError& error) {
    record(attempt, error.call(), "", error.errnum());
    return attempt;
  }
  const auto port_space = parse_port_space(target.port_space);
  const std::string ps_name = "RDMA_PS_" + std::string(target.port_space == "udp"  ? "UDP"
                                                       : target.port_space == "ib" ? "IB"
                                                                                   : "TCP");
  try {
    CmId id(*channel, port_space);
    record(attempt, "rdma_create_id", ps_name, 0);
    if (target.host.empty()) {
      probe_first_device(options, attempt);
      return attempt;
    }
    auto address = parse_address(target.host, target.port);
    const auto subject = address.to_string();
    if (rdma_bind_addr(id.get(), address.get()) != 0) {
      record(attempt, "rdma_bind_addr", subject, errno);
    } else {
      attempt.device = attached_device(id.get());
      attempt.port = id->port_num;
      record(attempt, "rdma_bind_addr", subject, 0,
             attempt.device.empty() ? "no device attached" : fmt::format("{} port {}", attempt.device, attempt.port));
      if (id->verbs != nullptr) {
        probe_registration(id->verbs, options, attempt);
      } else if (target.wildcard) {
        probe_first_device(options, attempt);
      }
    }
    const auto* bind = attempt.find("rdma_bind_addr");
    const bool as_destination = target.loopback || (!bind->ok() && bind->errnum == EADDRNOTAVAIL);
    if (!as_destination) {
      return attempt;
    }
    // Not bindable here (or loopback): try it the way a client uses it, as a destination.
    attempt.route_source = route_source(target);
    if (const auto route = route_to(target.host, ""); route.errnum == 0) {
      attempt.route_netdev = route.netdev;
      attempt.route_gateway = route.gateway;
    }
    CmId client(*channel, port_space);
    const auto timeout_ms = static_cast<int>(options.limits.timeout.count());
    if (rdma_resolve_addr(client.get(), nullptr, address.get(), timeout_ms) != 0) {
      record(attempt, "rdma_resolve_addr", subject, errno);
      return attempt;
    }
    int status = await_resolution(*channel, RDMA_CM_EVENT_ADDR_RESOLVED, options, "address resolution");
    record(attempt, "rdma_resolve_addr", subject, status,
           status == 0 ? fmt::format("{} port {}", attached_device(client.get()), client->port_num) : "");
    if (status != 0) return attempt;
    if (rdma_resolve_route(client.get(), timeout_ms) != 0) {
      record(attempt, "rdma_resolve_route", subject, errno);
      return attempt;
    }
    status = await_resolution(*channel, RDMA_CM_EVENT_ROUTE_RESOLVED, options, "route resolution");
    record(attempt, "rdma_resolve_route", subject, status);
    if (status == 0 && !target.loopback) {
      attempt.device = attached_device(client.get());
      attempt.port = client->port_num;
      if (client->verbs != nullptr) probe_registration(client->verbs, options, attempt);
    }
  } catch (const RdmaError& error) {
    record(attempt, error.call(), error.subject(), error.errnum());
  }
  return attempt;
}

Diagnosis diagnose_address(const std::string& address, const ProbeOptions& options) {
  Diagnosis d;
  std::string host = address;
  if (!address.empty()) {
    host = parse_address(address, 0).host_string();  // names resolve like the tools resolve them
  }
  d.target = make_target(host, 0, "tcp");
  d.inventory = collect_inventory(options);
  d.attempt = run_attempt(d.target, options);
  d.verdict = diagnose(d.target, d.inventory, d.attempt, options.siblings);
  return d;
}

}  // namespace rdmakit::diag
