#pragma once
// The verbs side of one diag-connect probe connection, on either host: a PD, a CQ, the
// 64 KiB buffer the client writes and reads (and sends from), on the agent the receives
// its SENDs land in, and the QP on the cm_id (RC; UD in the UDP port space). Torn down in order: the id with its QP
// first, then the memory, the CQ and the PD.

#include <cstdint>
#include <memory>
#include <vector>

#include <infiniband/verbs.h>

#include "lib/diag/probe_ticket.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/rdma/verbs.hpp"

namespace rdmakit::diag {

struct CheckConnection {
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionChannel> completion_channel;
  std::unique_ptr<CompletionQueue> cq;
  std::unique_ptr<RegisteredBuffer> buffer;  // agent::check_buffer_bytes, remote write and read
  std::vector<std::unique_ptr<RegisteredBuffer>> receives;
  CmId id;  // last: destroyed (with its QP) first

  // Creates everything on `id`'s device, with `receive_count` receives of the buffer's size posted.
  void create(std::uint16_t receive_count, ibv_qp_type qp_type = IBV_QPT_RC);
};

// Which end of a probe connection a cm_id is.
enum class ProbeEnd { client, agent };

// The scope of a probe's ticket (lib/diag/probe_ticket.hpp) as `id` names its two ends: the
// client's id once rdma_resolve_addr bound it, the agent's connect request's id. Both ends
// compute the same scope for one connection.
agent::TicketScope ticket_scope(rdma_cm_id* id, ProbeEnd end);

}  // namespace rdmakit::diag
