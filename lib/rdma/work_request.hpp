#pragma once
// The one builder of send work requests (SEND, SEND with immediate, RDMA WRITE and READ, and
// atomics, over one local buffer) and of receive requests, for endpoints, connection groups and the
// measurement loops. Inline: the loops build their post lists with it.

#include <infiniband/verbs.h>

#include <cstdint>

#include "lib/rdma/work_id.hpp"

namespace rdmakit {

struct SendRequest {
  WorkId id;
  ibv_wr_opcode opcode = IBV_WR_SEND;
  ibv_sge local{};     // what is sent or written, or where a READ lands
  unsigned flags = 0;  // IBV_SEND_SIGNALED, IBV_SEND_INLINE
  // RDMA WRITE, READ and atomics: the peer's buffer.
  std::uint64_t remote_address = 0;
  std::uint32_t rkey = 0;
  // Atomics: the value added (fetch-and-add) or compared, and the value swapped in.
  std::uint64_t compare_add = 0;
  std::uint64_t swap = 0;
};

// What a UD receive holds in front of each message: room for the GRH, whether or not the
// packet carried one (ibv_post_recv(3)).
inline constexpr std::uint32_t grh_bytes = sizeof(ibv_grh);
static_assert(grh_bytes == 40);

constexpr bool is_atomic(ibv_wr_opcode opcode) {
  return opcode == IBV_WR_ATOMIC_FETCH_AND_ADD || opcode == IBV_WR_ATOMIC_CMP_AND_SWP;
}

// Fills `wr` from `request`, its one scatter/gather entry in `sge`. Sets only what a request
// names, so a post list keeps its `next` links; the caller sets `imm_data` and, for a
// datagram, the UD address after this call (they share storage with the RDMA fields).
inline void build_send(const SendRequest& request, ibv_send_wr& wr, ibv_sge& sge) {
  sge = request.local;
  wr.wr_id = request.id.encode();
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = request.opcode;
  wr.send_flags = request.flags;
  if (is_atomic(request.opcode)) {
    wr.wr.atomic.remote_addr = request.remote_address;
    wr.wr.atomic.compare_add = request.compare_add;
    wr.wr.atomic.swap = request.swap;
    wr.wr.atomic.rkey = request.rkey;
  } else {
    wr.wr.rdma.remote_addr = request.remote_address;
    wr.wr.rdma.rkey = request.rkey;
  }
}

// Addresses a send built by build_send to a UD queue pair (after build_send: the UD
// address shares storage with the RDMA fields).
struct DatagramAddress {
  ibv_ah* ah = nullptr;
  std::uint32_t qp_num = 0;
  std::uint32_t qkey = 0;
};
inline void address_datagram(const DatagramAddress& to, ibv_send_wr& wr) {
  wr.wr.ud.ah = to.ah;
  wr.wr.ud.remote_qpn = to.qp_num;
  wr.wr.ud.remote_qkey = to.qkey;
}

// Fills `wr` for a receive into `local` (its one scatter/gather entry in `sge`), carrying `id`.
inline void build_receive(WorkId id, const ibv_sge& local, ibv_recv_wr& wr, ibv_sge& sge) {
  sge = local;
  wr.wr_id = id.encode();
  wr.sg_list = &sge;
  wr.num_sge = 1;
}

constexpr unsigned send_flags(bool signalled, bool inline_data) {
  return (signalled ? unsigned{IBV_SEND_SIGNALED} : 0U) | (inline_data ? unsigned{IBV_SEND_INLINE} : 0U);
}

// The kind of work a send opcode does, for its id.
constexpr WorkKind work_kind_of(ibv_wr_opcode opcode) {
  switch (opcode) {
    case IBV_WR_RDMA_READ: return WorkKind::rdma_read;
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return WorkKind::rdma_write;
    default: return WorkKind::send;
  }
}

}  // namespace rdmakit
