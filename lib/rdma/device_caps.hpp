#pragma once
// What one RDMA device's port can do, read once from the live device (lib/rdma/device_query)
// and asked by every tool instead of assuming what rxe allows: rxe takes any read depth,
// inline size, immediate data and UD, and the kernel sees its packets; cxgb4, irdma, EFA and
// the hardware RoCE NICs do not. The rules that follow from it are here, pure, so that unit
// tests give them other providers' numbers.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rdmakit {

enum class Transport {
  infiniband,
  roce,         // InfiniBand transport over Ethernet (RoCE v1/v2): rxe, mlx5, bnxt_re, irdma in RoCE mode
  iwarp,        // RDMAP over TCP: cxgb4, irdma in iWARP mode, siw
  unspecified,  // neither (EFA's SRD, usNIC): libibverbs' IBV_TRANSPORT_UNSPECIFIED
};
std::string_view transport_name(Transport transport);

struct DeviceCaps {
  std::string device;
  std::uint8_t port = 1;
  Transport transport = Transport::roce;
  // A software device (rxe, siw) whose packets go through a netdev's stack: nftables,
  // rp_filter and tc act on them. A hardware NIC's RDMA traffic never meets them.
  bool kernel_sees_traffic = false;
  // Incoming RDMA READs and atomics a QP may have in flight (max_qp_rd_atom), and outgoing
  // ones (max_qp_init_rd_atom): what rdma_connect and rdma_accept refuse to exceed (EINVAL).
  std::uint32_t max_reads_in = 0;
  std::uint32_t max_reads_out = 0;
  bool atomics = false;  // atomic_cap is not IBV_ATOMIC_NONE
};

// iWARP has no unreliable datagrams, no immediate data and no RNR retry, and the sink of an
// RDMA READ is written by the peer's read response: it needs remote write access.
inline bool has_datagrams(const DeviceCaps& caps) {
  return caps.transport != Transport::iwarp;
}
inline bool has_immediate_data(const DeviceCaps& caps) {
  return caps.transport != Transport::iwarp && caps.transport != Transport::unspecified;
}
inline bool read_sink_needs_remote_write(const DeviceCaps& caps) {
  return caps.transport == Transport::iwarp;
}

// How many RDMA READs to offer in the CM exchange: what the tool wants, within what the
// device allows (librdmacm refuses more with EINVAL) and the 8 bits the CM carries.
std::uint8_t fitted_read_depth(std::uint32_t wanted, std::uint32_t device_limit);

// The inline sizes to ask a QP for, in turn, when `wanted` is refused: no query says a
// device's limit, only creating a QP does (irdma grants 48 bytes on some cards, where rxe
// takes any size). From `wanted` down through the sizes providers grant, ending at 0.
std::vector<std::uint32_t> inline_sizes_to_try(std::uint32_t wanted);

// What a tool needs of the device beyond a reliable connection.
enum class Need { datagrams, multicast };

// Why a tool that needs `need` cannot run on this device, as the one sentence it exits 77
// with (after the tool's name); nullopt when it can. E.g. "cxgb4_0 is iWARP: it has no
// unreliable datagrams (UD), which need RoCE or InfiniBand".
std::optional<std::string> missing_for(const DeviceCaps& caps, Need need);

}  // namespace rdmakit
