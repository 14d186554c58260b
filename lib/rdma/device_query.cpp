#include "lib/rdma/device_query.hpp"

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "lib/base/error.hpp"

namespace rdmakit {

namespace {

// The vendor ids the software devices report (the kernel's rxe_param.h and siw.h): their
// packets pass through a netdev's stack, a hardware NIC's never do.
constexpr std::uint32_t rxe_vendor_id = 0xffffff;
constexpr std::uint32_t siw_vendor_id = 0x626d74;

Transport transport_of(const ibv_device& device, const ibv_port_attr& port) {
  if (device.transport_type == IBV_TRANSPORT_IWARP || device.node_type == IBV_NODE_RNIC) return Transport::iwarp;
  if (device.transport_type != IBV_TRANSPORT_IB) return Transport::unspecified;
  return port.link_layer == IBV_LINK_LAYER_INFINIBAND ? Transport::infiniband : Transport::roce;
}

}  // namespace

DeviceCaps read_device_caps(ibv_context* context, std::uint8_t port) {
  const std::string name = ibv_get_device_name(context->device);
  ibv_device_attr device{};
  check_returned(ibv_query_device(context, &device), "ibv_query_device", name);
  ibv_port_attr port_attributes{};
  check_returned(ibv_query_port(context, port, &port_attributes), "ibv_query_port", name);
  return DeviceCaps{
      .device = name,
      .port = port,
      .transport = transport_of(*context->device, port_attributes),
      .kernel_sees_traffic = device.vendor_id == rxe_vendor_id || device.vendor_id == siw_vendor_id,
      .max_reads_in = static_cast<std::uint32_t>(std::max(device.max_qp_rd_atom, 0)),
      .max_reads_out = static_cast<std::uint32_t>(std::max(device.max_qp_init_rd_atom, 0)),
      .atomics = device.atomic_cap != IBV_ATOMIC_NONE,
  };
}

void throw_datagram_refusal(const RdmaError& error, const std::string& device) {
  if (error.errnum() == EOPNOTSUPP) {
    throw Unsupported(
        fmt::format("{} refuses a UD QP ({}): unreliable datagrams need RoCE or InfiniBand", device, error.what()));
  }
  throw error;
}

}  // namespace rdmakit
