#include "lib/diag/host_view.hpp"

#include <arpa/inet.h>
#include <linux/capability.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_netlink.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <optional>
#include <span>

#include <fmt/format.h>

#ifdef RDMAKIT_HAVE_NFTABLES
#include <nftables/libnftables.h>
#endif

#include "lib/base/host_name.hpp"
#include "lib/base/process_limits.hpp"
#include "lib/diag/host_probe.hpp"
#include "lib/diag/host_view_read.hpp"
#include "lib/diag/netlink.hpp"
#include "lib/rdma/cm.hpp"

namespace rdmakit::diag {

namespace {

// RDMA_CM_LISTEN in the kernel's enum rdma_cm_state (drivers/infiniband/core/cma_priv.h:
// IDLE, ADDR_QUERY, ADDR_RESOLVED, ROUTE_QUERY, ROUTE_RESOLVED, CONNECT, DISCONNECT,
// ADDR_BOUND, LISTEN, ...), the state `rdma resource show cm_id` prints as LISTEN.
constexpr std::uint8_t rdma_cm_listen_state = 8;

std::string port_space_name(std::uint32_t port_space) {
  switch (port_space) {
    case RDMA_PS_TCP: return "tcp";
    case RDMA_PS_UDP: return "udp";
    case RDMA_PS_IB: return "ib";
    case RDMA_PS_IPOIB: return "ipoib";
    default: return fmt::format("0x{:x}", port_space);
  }
}

// One cm_id of the dump, when it listens.
std::optional<CmListener> listener_from(const NetlinkAttribute& entry, const std::string& device) {
  std::optional<std::uint8_t> state;
  std::uint32_t port_space = 0;
  std::optional<SocketAddress> source;
  std::uint32_t pid = 0;
  for (const auto& attribute : entry.nested()) {
    if (attribute.type == RDMA_NLDEV_ATTR_RES_PID) {
      pid = attribute.u32().value_or(0);
    } else if (attribute.type == RDMA_NLDEV_ATTR_RES_STATE) {
      state = attribute.u8();
    } else if (attribute.type == RDMA_NLDEV_ATTR_RES_PS) {
      port_space = attribute.u32().value_or(0);
    } else if (attribute.type == RDMA_NLDEV_ATTR_RES_SRC_ADDR) {
      source.emplace();
      std::memcpy(&source->storage, attribute.payload.data(),
                  std::min(attribute.payload.size(), sizeof source->storage));
    }
  }
  if (state != rdma_cm_listen_state) return std::nullopt;
  return CmListener{.port = source ? source->port() : std::uint16_t{0},
                    .port_space = port_space_name(port_space),
                    .address = source ? source->host_string() : std::string{},
                    .device = device,
                    .pid = pid};
}

}  // namespace

std::vector<CmListener> listeners_in(const nlmsghdr& message) {
  std::string device;
  std::vector<NetlinkAttribute> entries;
  for (const auto& attribute : message_attributes(message)) {
    if (attribute.type == RDMA_NLDEV_ATTR_DEV_NAME) {
      device = attribute.text();
    } else if (attribute.type == RDMA_NLDEV_ATTR_RES_CM_ID) {
      entries = attribute.nested();
    }
  }
  std::vector<CmListener> listeners;
  for (const auto& entry : entries) {
    auto listener = entry.type == RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY ? listener_from(entry, device) : std::nullopt;
    if (listener) listeners.push_back(std::move(*listener));
  }
  return listeners;
}

bool read_cm_listeners(HostView& view) {
  view.listeners.clear();
  const auto indices = rdma_device_indices();
  if (!indices) return false;
  const auto collect = [&](const nlmsghdr& message) {
    for (auto& listener : listeners_in(message)) {
      if (view.listeners.size() < max_list_entries) view.listeners.push_back(std::move(listener));
    }
  };
  // The kernel dumps cm_ids per device only (RDMA_NLDEV_ATTR_DEV_INDEX is required).
  for (const auto& [device, index] : *indices) {
    NetlinkRequest request(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_RES_CM_ID_GET), NLM_F_REQUEST | NLM_F_DUMP);
    request.add_u32(RDMA_NLDEV_ATTR_DEV_INDEX, static_cast<std::uint32_t>(index));
    if (netlink_exchange(NETLINK_RDMA, request, collect) != 0) return false;
  }
  return true;
}

Firewall read_firewall() {
  Firewall firewall;
#ifdef RDMAKIT_HAVE_NFTABLES
  // Asked without it, libnftables also writes its complaint to our stderr.
  if (!has_capability(CAP_NET_ADMIN)) {
    firewall.error = "not readable: Operation not permitted (reading the ruleset needs CAP_NET_ADMIN)";
    return firewall;
  }
  const std::unique_ptr<nft_ctx, decltype(&nft_ctx_free)> context(nft_ctx_new(NFT_CTX_DEFAULT), &nft_ctx_free);
  if (!context || nft_ctx_buffer_output(context.get()) != 0 || nft_ctx_buffer_error(context.get()) != 0) {
    firewall.error = "nftables not available: no libnftables context";
    return firewall;
  }
  nft_ctx_output_set_flags(context.get(), NFT_CTX_OUTPUT_JSON | NFT_CTX_OUTPUT_HANDLE);
  if (nft_run_cmd_from_buffer(context.get(), "list ruleset") != 0) {
    // "netlink: Error: cache initialization failed: Operation not permitted": its last part.
    std::string error = nft_ctx_get_error_buffer(context.get());
    error = error.substr(0, error.find('\n'));
    firewall.error =
        "not readable: " + error.substr(error.rfind(": ") == std::string::npos ? 0 : error.rfind(": ") + 2);
    return firewall;
  }
  const auto document = nlohmann::json::parse(nft_ctx_get_output_buffer(context.get()), nullptr, false);
  if (document.is_discarded()) {
    firewall.error = "not readable: nft's answer is not JSON";
    return firewall;
  }
  return firewall_from_nft_json(document);
#else
  firewall.error = "built without libnftables";
  return firewall;
#endif
}

HostView read_host_view(const HostViewOptions& options) {
  ProbeOptions probe;
  probe.sysfs_root = options.sysfs_root;
  auto view = view_from(collect_inventory(probe));
  view.host_name = host_name();
  read_net_files(options.procfs_root, options.sysfs_root, options.configfs_root, view);
  if (options.read_firewall) {
    view.firewall = read_firewall();
  } else {
    view.firewall.error = "not read";
  }
  view.listeners_known = read_cm_listeners(view);
  return view;
}

}  // namespace rdmakit::diag
