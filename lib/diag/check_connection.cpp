#include "lib/diag/check_connection.hpp"

#include <arpa/inet.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "lib/base/error.hpp"
#include "lib/diag/agent_protocol.hpp"

namespace rdmakit::diag {

namespace {

constexpr std::uint32_t send_depth = 4;

}  // namespace

void CheckConnection::create(std::uint16_t receive_count, ibv_qp_type qp_type) {
  auto* verbs = id->verbs;
  pd = std::make_unique<ProtectionDomain>(verbs);
  completion_channel = std::make_unique<CompletionChannel>(verbs);
  const int depth = static_cast<int>(send_depth) + receive_count;
  cq = std::make_unique<CompletionQueue>(verbs, depth, *completion_channel);
  constexpr int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  buffer = std::make_unique<RegisteredBuffer>(pd->get(), agent::check_buffer_bytes, access);
  auto attributes = qp_attributes({.type = qp_type,
                                   .send_depth = send_depth,
                                   .receive_depth = receive_count > 0 ? receive_count : 1U,
                                   .signal_every_send = true,
                                   .inline_bytes = 0},
                                  cq->get());
  id.create_qp(pd->get(), attributes, ibv_get_device_name(verbs->device));
  for (std::uint16_t i = 0; i < receive_count; ++i) {
    auto& landing = *receives.emplace_back(
        std::make_unique<RegisteredBuffer>(pd->get(), agent::check_buffer_bytes, IBV_ACCESS_LOCAL_WRITE));
    ibv_sge sge{.addr = landing.address(), .length = agent::check_buffer_bytes, .lkey = landing.lkey()};
    ibv_recv_wr request{};
    request.wr_id = i;
    request.sg_list = &sge;
    request.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    check_returned(ibv_post_recv(id->qp, &request, &bad), "ibv_post_recv", "diag-connect agent");
  }
}

agent::TicketScope ticket_scope(rdma_cm_id* id, ProbeEnd end) {
  const auto here = IpAddress::of(rdma_get_local_addr(id)).value_or(IpAddress{});
  const auto there = IpAddress::of(rdma_get_peer_addr(id)).value_or(IpAddress{});
  if (end == ProbeEnd::agent) return {.agent = here, .agent_port = ntohs(rdma_get_src_port(id)), .client = there};
  return {.agent = there, .agent_port = ntohs(rdma_get_dst_port(id)), .client = here};
}

}  // namespace rdmakit::diag
