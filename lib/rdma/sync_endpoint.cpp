#include "lib/rdma/sync_endpoint.hpp"

#include <cerrno>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/rdma/cq_waiter.hpp"
#include "lib/rdma/verbs.hpp"

namespace rdmakit {

namespace {

void await_readable(int fd, const Bounds& bounds) {
  rdmakit::await_readable({fd}, bounds.stop_fd, bounds.deadline, bounds.awaiting);
}

bool would_block(int result) {
  return result != 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

std::string peer_of(rdma_cm_id* id) {
  const auto* address = rdma_get_peer_addr(id);
  return address != nullptr && address->sa_family != 0 ? rdmakit::address_of(address).to_string() : std::string();
}

}  // namespace

SyncEndpoint::SyncEndpoint(const AddrInfo& info, ibv_qp_init_attr* qp_attributes) {
  if (rdma_create_ep(&id_, info.get(), nullptr, qp_attributes) != 0) {
    const auto* destination = info.get()->ai_dst_addr;
    const auto* source = info.get()->ai_src_addr;
    const auto* subject = destination ? destination : source;
    const auto address = subject ? rdmakit::address_of(subject) : SocketAddress{};
    throw RdmaError("rdma_create_ep", subject ? address.to_string() : "", errno, subject ? address.host_string() : "");
  }
  make_nonblocking();
}

SyncEndpoint::SyncEndpoint(rdma_cm_id* adopted) : id_(adopted) {
  make_nonblocking();
}

SyncEndpoint::SyncEndpoint(SyncEndpoint&& other) noexcept
    : id_(std::exchange(other.id_, nullptr)),
      state_(std::exchange(other.state_, CmState::idle)),
      gate_(std::move(other.gate_)),
      gate_slot_(std::move(other.gate_slot_)) {}

SyncEndpoint::~SyncEndpoint() {
  if (id_ != nullptr) {
    rdma_destroy_ep(id_);
  }
}

void SyncEndpoint::make_nonblocking() {
  set_nonblocking(id_->channel->fd, "rdma_cm channel");
  if (id_->send_cq_channel) set_nonblocking(id_->send_cq_channel->fd, "send completion channel");
  if (id_->recv_cq_channel) set_nonblocking(id_->recv_cq_channel->fd, "receive completion channel");
}

void SyncEndpoint::finish_cm_call(const char* call, const Bounds& bounds) {
  for (;;) {
    const auto event = next_cm_event(id_->channel, bounds.deadline, bounds.stop_fd, bounds.awaiting);
    const auto transition = advance(state_, *event);
    switch (transition.action) {
      case CmAction::fail: {
        const auto peer = peer_of(id_) + refused_by_server(*event);
        throw event_failure(*event, call,
                            event->event == RDMA_CM_EVENT_REJECTED ? peer : peer + ": " + transition.reason,
                            std::string_view(call) == "rdma_connect" ? address_of(rdma_get_peer_addr(id_)).host_string()
                                                                     : std::string());
      }
      case CmAction::start_traffic:
      case CmAction::stop_traffic: return;
      default: break;  // informational (timewait exit, address change): the call is still under way
    }
  }
}

void SyncEndpoint::listen(int backlog) {
  if (rdma_listen(id_, backlog) != 0) {
    throw RdmaError("rdma_listen", rdmakit::address_of(rdma_get_local_addr(id_)).to_string(), errno);
  }
}

SyncEndpoint SyncEndpoint::get_request(const Bounds& bounds) {
  for (;;) {
    rdma_cm_id* child = nullptr;
    while (rdma_get_request(id_, &child) != 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        throw RdmaError("rdma_get_request", rdmakit::address_of(rdma_get_local_addr(id_)).to_string(), errno);
      }
      await_readable(id_->channel->fd, bounds);
    }
    SyncEndpoint request(child);
    if (!gate_) return request;
    if (auto slot = admit_request(*gate_, child)) {
      request.gate_slot_ = std::move(*slot);
      return request;
    }
  }
}

void SyncEndpoint::complete_cm_call(const char* call, int result, const Bounds& bounds) {
  if (would_block(result)) {
    finish_cm_call(call, bounds);
  } else if (result != 0) {
    throw RdmaError(call, peer_of(id_), errno);
  }
}

void SyncEndpoint::connect(const Bounds& bounds) {
  state_ = CmState::connecting;
  complete_cm_call("rdma_connect", rdma_connect(id_, nullptr), bounds);
  state_ = CmState::established;
  if (id_->qp != nullptr) keep_rnr_naks_short(id_->qp);
}

void SyncEndpoint::accept(const Bounds& bounds) {
  state_ = CmState::accepting;
  complete_cm_call("rdma_accept", rdma_accept(id_, nullptr), bounds);
  state_ = CmState::established;
  if (id_->qp != nullptr) keep_rnr_naks_short(id_->qp);
}

unsigned SyncEndpoint::rnr_nak_timer() const {
  return rnr_nak_timer_of(id_->qp);
}

void SyncEndpoint::disconnect(const Bounds& bounds) noexcept {
  try {
    // Once the peer's DISCONNECTED has been read there is nothing left to wait for.
    if (const int result = rdma_disconnect(id_); would_block(result) && state_ == CmState::established) {
      finish_cm_call("rdma_disconnect", bounds);
    }
  } catch (const std::exception& error) {
    spdlog::debug("disconnect: {}", error.what());
  }
}

namespace {

// A DISCONNECTED event while waiting for a completion means the peer has gone: say so now
// instead of waiting for the transport's retries to run out.
void check_peer_left(rdma_cm_id* id, CmState& state, const Bounds& bounds) {
  const auto event = poll_cm_event(id->channel);
  if (!event) {
    return;
  }
  const auto transition = advance(state, *event);
  if (transition.action == CmAction::stop_traffic || transition.action == CmAction::fail) {
    throw RunStopped(StopReason::peer_disconnected, transition.reason + " while waiting for " + bounds.awaiting);
  }
}

// Sleeps on `waiter` within `bounds`; a CM event is looked at for the peer leaving.
void sleep_on(CqWaiter& waiter, rdma_cm_id* id, CmState& state, const Bounds& bounds) {
  switch (waiter.sleep(bounds.deadline)) {
    case Woken::completion: break;
    case Woken::cm_event: check_peer_left(id, state, bounds); break;
    case Woken::stopped: throw RunStopped(StopReason::interrupted, "interrupted while waiting for " + bounds.awaiting);
    case Woken::timed_out: throw RunStopped(StopReason::timed_out, "timed out waiting for " + bounds.awaiting);
  }
}

// What rdma_get_send_comp and rdma_get_recv_comp do (`name`), with the sleep bounded and
// watching the CM channel and the stop signal too.
ibv_wc next_completion(rdma_cm_id* id, CmState& state, ibv_cq* cq, const char* name, const Bounds& bounds) {
  std::optional<CqWaiter> waiter;  // made on the first empty poll only: most calls find their completion
  ibv_wc wc{};
  for (;;) {
    const int n = ibv_poll_cq(cq, 1, &wc);
    if (n > 0) break;
    if (n < 0) throw RdmaError::without_errno(name, "", fmt::format("ibv_poll_cq returned {}", n));
    if (!waiter)
      waiter.emplace(CompletionMode::events, std::span(&cq, 1), std::span(&id->channel->fd, 1), bounds.stop_fd);
    if (!waiter->armed()) {
      waiter->arm();  // then poll once more: a completion that arrived in between raises no event
      continue;
    }
    sleep_on(*waiter, id, state, bounds);
  }
  if (wc.status != IBV_WC_SUCCESS) {
    if (wc.status == IBV_WC_WR_FLUSH_ERR) {
      throw RunStopped(StopReason::peer_disconnected, "the connection closed while waiting for " + bounds.awaiting);
    }
    throw completion_error(wc, std::string(name) + ": " + ibv_wc_status_str(wc.status));
  }
  return wc;
}

}  // namespace

ibv_wc SyncEndpoint::send_completion(const Bounds& bounds) {
  return next_completion(id_, state_, id_->send_cq, "rdma_get_send_comp", bounds);
}

ibv_wc SyncEndpoint::recv_completion(const Bounds& bounds) {
  return next_completion(id_, state_, id_->recv_cq, "rdma_get_recv_comp", bounds);
}

std::uint32_t SyncEndpoint::max_inline_data() const {
  if (id_->qp == nullptr) return 0;
  const auto query = query_qp(id_->qp, IBV_QP_CAP);
  return query ? query->init.cap.max_inline_data : 0;
}

ibv_qp_init_attr message_qp_attributes(std::uint32_t inline_bytes) {
  return qp_attributes({.type = IBV_QPT_RC,
                        .send_depth = 1,
                        .receive_depth = 1,
                        .signal_every_send = true,
                        .inline_bytes = inline_bytes},
                       nullptr);
}

SyncEndpoint create_message_endpoint(const AddrInfo& info, std::uint32_t inline_bytes, ibv_qp_init_attr& attributes) {
  std::optional<SyncEndpoint> endpoint;
  create_with_inline(
      inline_bytes,
      [&](std::uint32_t granted) {
        attributes = message_qp_attributes(granted);
        endpoint.emplace(info, &attributes);
      },
      "the device");
  return std::move(*endpoint);
}

void throw_post_error(const char* call) {
  throw RdmaError(call, "", errno);
}

MessageRegion::MessageRegion(rdma_cm_id* id, void* address, std::size_t length)
    : mr_(rdma_reg_msgs(id, address, length)) {
  check_pointer(mr_, "rdma_reg_msgs", std::to_string(length) + " bytes");
}

MessageRegion::~MessageRegion() {
  if (rdma_dereg_mr(mr_) != 0) {
    spdlog::warn("rdma_dereg_mr: {}", std::strerror(errno));
  }
}

}  // namespace rdmakit
