#include "lib/diag/cm_listeners.hpp"

#include <rdma/rdma_cma.h>
#include <rdma/rdma_netlink.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "lib/diag/host_probe.hpp"
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

}  // namespace rdmakit::diag
