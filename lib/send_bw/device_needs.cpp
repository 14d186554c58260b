#include "lib/send_bw/device_needs.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/rdma/verbs.hpp"

namespace rdmakit {

std::optional<std::string> atomics_missing(const ibv_device_attr& device, const std::string& name) {
  if (device.atomic_cap == IBV_ATOMIC_NONE) return fmt::format("{} does not do atomics (atomic_cap none)", name);
  return std::nullopt;
}

void check_device_limits(ibv_context* context, std::uint8_t port, const BwDeviceNeeds& limits) {
  ibv_device_attr device{};
  check_returned(ibv_query_device(context, &device), "ibv_query_device", ibv_get_device_name(context->device));
  ibv_port_attr port_attributes{};
  check_returned(ibv_query_port(context, port, &port_attributes), "ibv_query_port",
                 ibv_get_device_name(context->device));
  const std::string name = ibv_get_device_name(context->device);
  if (!limits.device.empty() && limits.device != name) {
    throw UsageError(fmt::format("-d {}: the address is served by {}", limits.device, name));
  }
  const auto depth = std::max(limits.send_depth, limits.recv_depth);
  if (std::max(limits.send_depth + limits.heartbeat_slots, limits.recv_depth) >
      static_cast<std::uint32_t>(device.max_qp_wr)) {
    throw UsageError(
        fmt::format("-t {} is above {}'s maximum queue depth {}{}", depth, name, device.max_qp_wr,
                    limits.heartbeat_slots > 0 ? ", less the heartbeat's send slot of a one-sided test" : ""));
  }
  // One CQ takes the send and the receive completions.
  const auto entries = limits.send_depth + limits.heartbeat_slots + limits.recv_depth;
  if (entries > static_cast<std::uint32_t>(device.max_cqe)) {
    throw UsageError(fmt::format("-t {} needs {} completion queue entries; {} allows at most {}", depth, entries, name,
                                 device.max_cqe));
  }
  if (limits.largest > port_attributes.max_msg_sz) {
    throw UsageError(
        fmt::format("-s {} is above {}'s maximum message size {}", limits.largest, name, port_attributes.max_msg_sz));
  }
  if (limits.atomics) {
    if (const auto missing = atomics_missing(device, name)) throw Unsupported("--op atomic: " + *missing);
  }
  if (limits.datagram && limits.largest > mtu_bytes(port_attributes.active_mtu)) {
    throw UsageError(
        fmt::format("-c UD: -s {} is above the active MTU of {} port {} ({} bytes); a datagram is one packet",
                    limits.largest, name, port, mtu_bytes(port_attributes.active_mtu)));
  }
  if (limits.mtu && *limits.mtu > port_attributes.active_mtu) {
    throw UsageError(fmt::format("-m {} is above the active MTU of {} port {} ({} bytes)", mtu_bytes(*limits.mtu), name,
                                 port, mtu_bytes(port_attributes.active_mtu)));
  }
}

}  // namespace rdmakit
