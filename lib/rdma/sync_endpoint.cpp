#include "lib/rdma/sync_endpoint.hpp"

#include <netdb.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <spdlog/spdlog.h>

#include "lib/core/error.hpp"
#include "lib/rdma/cm.hpp"
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
  return address && address->sa_family ? rdmakit::address_of(address).to_string() : std::string();
}

}  // namespace

namespace {

rdma_addrinfo tcp_hints(bool passive) {
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_TCP;
  if (passive) hints.ai_flags = RAI_PASSIVE;
  return hints;
}

}  // namespace

AddrInfo::AddrInfo(const std::string& host, const std::string& port, bool passive)
    : AddrInfo(host, port, tcp_hints(passive)) {}

AddrInfo::AddrInfo(const std::string& host, const std::string& port, const rdma_addrinfo& hints) {
  // Not asked at all: the resolver could only answer "try again" where no DNS server is reachable.
  if (reserved_invalid_name(host)) throw_unresolved(host, EAI_NONAME);
  const int rc =
      rdma_getaddrinfo(host.empty() ? nullptr : host.c_str(), port.empty() ? nullptr : port.c_str(), &hints, &info_);
  if (rc == 0) return;
  // getaddrinfo's EAI_* code comes back as the return value, errno then being unreliable;
  // librdmacm's own failures (no device for ucma_init, say) return -1 with errno set.
  if (rc != -1 && rc != EAI_SYSTEM) throw_unresolved(host, rc);
  throw RdmaError("rdma_getaddrinfo", host + ":" + port, errno ? errno : ENOENT);
}

AddrInfo::~AddrInfo() {
  rdma_freeaddrinfo(info_);
}

SyncEndpoint::SyncEndpoint(const AddrInfo& info, ibv_qp_init_attr* qp_attributes) {
  if (rdma_create_ep(&id_, info.get(), nullptr, qp_attributes) != 0) {
    const auto* destination = info.get()->ai_dst_addr;
    const auto* source = info.get()->ai_src_addr;
    const auto* subject = destination ? destination : source;
    throw RdmaError("rdma_create_ep", subject ? rdmakit::address_of(subject).to_string() : "", errno);
  }
  make_nonblocking();
}

SyncEndpoint::SyncEndpoint(rdma_cm_id* adopted) : id_(adopted) {
  make_nonblocking();
}

SyncEndpoint::SyncEndpoint(SyncEndpoint&& other) noexcept : id_(std::exchange(other.id_, nullptr)) {}

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
  rdma_cm_event* event = nullptr;
  for (;;) {
    if (rdma_get_cm_event(id_->channel, &event) == 0) break;
    if (errno != EAGAIN && errno != EWOULDBLOCK) throw RdmaError("rdma_get_cm_event", "", errno);
    await_readable(id_->channel->fd, bounds);
  }
  const auto type = event->event;
  const int status = event->status;
  rdma_ack_cm_event(event);
  if (type == RDMA_CM_EVENT_ESTABLISHED || type == RDMA_CM_EVENT_DISCONNECTED) {
    return;
  }
  if (type == RDMA_CM_EVENT_REJECTED) {
    throw RdmaError(call, peer_of(id_), ECONNREFUSED);
  }
  throw RdmaError(call, std::string(rdma_event_str(type)), status < 0 ? -status : (status ? status : ETIMEDOUT));
}

void SyncEndpoint::listen(int backlog) {
  if (rdma_listen(id_, backlog) != 0) {
    throw RdmaError("rdma_listen", rdmakit::address_of(rdma_get_local_addr(id_)).to_string(), errno);
  }
}

SyncEndpoint SyncEndpoint::get_request(const Bounds& bounds) {
  rdma_cm_id* child = nullptr;
  while (rdma_get_request(id_, &child) != 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      throw RdmaError("rdma_get_request", rdmakit::address_of(rdma_get_local_addr(id_)).to_string(), errno);
    }
    await_readable(id_->channel->fd, bounds);
  }
  return SyncEndpoint(child);
}

void SyncEndpoint::complete_cm_call(const char* call, int result, const Bounds& bounds) {
  if (would_block(result)) {
    finish_cm_call(call, bounds);
  } else if (result != 0) {
    throw RdmaError(call, peer_of(id_), errno);
  }
}

void SyncEndpoint::connect(const Bounds& bounds) {
  complete_cm_call("rdma_connect", rdma_connect(id_, nullptr), bounds);
}

void SyncEndpoint::accept(const Bounds& bounds) {
  complete_cm_call("rdma_accept", rdma_accept(id_, nullptr), bounds);
}

void SyncEndpoint::disconnect(const Bounds& bounds) noexcept {
  try {
    if (const int result = rdma_disconnect(id_); would_block(result)) {
      finish_cm_call("rdma_disconnect", bounds);
    }
  } catch (const std::exception& error) {
    spdlog::debug("disconnect: {}", error.what());
  }
}

namespace {

using CompletionCall = int (*)(rdma_cm_id*, ibv_wc*);

// A DISCONNECTED event while waiting for a completion means the peer has gone: say so now
// instead of waiting for the transport's retries to run out.
void check_peer_left(rdma_cm_id* id, const Bounds& bounds) {
  rdma_cm_event* event = nullptr;
  if (rdma_get_cm_event(id->channel, &event) != 0) {
    return;
  }
  const auto type = event->event;
  rdma_ack_cm_event(event);
  if (type == RDMA_CM_EVENT_DISCONNECTED || type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
    throw RunStopped(StopReason::peer_disconnected, "the peer disconnected while waiting for " + bounds.awaiting);
  }
}

ibv_wc next_completion(rdma_cm_id* id, CompletionCall call, const char* name, int fd, const Bounds& bounds) {
  ibv_wc wc{};
  for (;;) {
    const int n = call(id, &wc);
    if (n > 0) break;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) throw RdmaError(name, "", errno);
    if (rdmakit::await_readable({fd, id->channel->fd}, bounds.stop_fd, bounds.deadline, bounds.awaiting) == 1) {
      check_peer_left(id, bounds);
    }
  }
  if (wc.status != IBV_WC_SUCCESS) {
    if (wc.status == IBV_WC_WR_FLUSH_ERR) {
      throw RunStopped(StopReason::peer_disconnected, "the connection closed while waiting for " + bounds.awaiting);
    }
    throw CompletionError(std::string(name) + ": " + ibv_wc_status_str(wc.status), wc.status);
  }
  return wc;
}

}  // namespace

ibv_wc SyncEndpoint::send_completion(const Bounds& bounds) {
  return next_completion(id_, rdma_get_send_comp, "rdma_get_send_comp", id_->send_cq_channel->fd, bounds);
}

ibv_wc SyncEndpoint::recv_completion(const Bounds& bounds) {
  return next_completion(id_, rdma_get_recv_comp, "rdma_get_recv_comp", id_->recv_cq_channel->fd, bounds);
}

std::uint32_t SyncEndpoint::max_inline_data() const {
  ibv_qp_attr attributes{};
  ibv_qp_init_attr init{};
  if (id_->qp == nullptr || ibv_query_qp(id_->qp, &attributes, IBV_QP_CAP, &init) != 0) {
    return 0;
  }
  return init.cap.max_inline_data;
}

ibv_qp_init_attr message_qp_attributes(std::uint32_t inline_bytes) {
  ibv_qp_init_attr attributes{};
  attributes.cap.max_send_wr = attributes.cap.max_recv_wr = 1;
  attributes.cap.max_send_sge = attributes.cap.max_recv_sge = 1;
  attributes.cap.max_inline_data = inline_bytes;
  attributes.sq_sig_all = 1;
  attributes.qp_type = IBV_QPT_RC;
  return attributes;
}

SyncEndpoint create_message_endpoint(const AddrInfo& info, std::uint32_t inline_bytes, ibv_qp_init_attr& attributes) {
  attributes = message_qp_attributes(inline_bytes);
  try {
    return SyncEndpoint(info, &attributes);
  } catch (const RdmaError& error) {
    if (inline_bytes == 0 || (error.errnum() != EINVAL && error.errnum() != ENOMEM && error.errnum() != EOPNOTSUPP)) {
      throw;
    }
    spdlog::info("the device refuses {} inline bytes ({}); sending from registered memory", inline_bytes, error.what());
    attributes = message_qp_attributes(0);
    return SyncEndpoint(info, &attributes);
  }
}

void throw_post_error(const char* call) {
  throw RdmaError(call, "", errno);
}

MessageRegion::MessageRegion(rdma_cm_id* id, void* address, std::size_t length)
    : mr_(rdma_reg_msgs(id, address, length)) {
  if (mr_ == nullptr) {
    throw RdmaError("rdma_reg_msgs", std::to_string(length) + " bytes", errno);
  }
}

MessageRegion::~MessageRegion() {
  if (rdma_dereg_mr(mr_) != 0) {
    spdlog::warn("rdma_dereg_mr: {}", std::strerror(errno));
  }
}

}  // namespace rdmakit
