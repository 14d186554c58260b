#include "lib/verbs.hpp"

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "lib/error.hpp"

namespace rdmakit {

namespace {

// libibverbs destroy calls return an errno value (or -1 with errno set, depending on
// provider); either way we only log: a destructor must not throw.
void log_teardown(const char* call, int rc) {
  if (rc != 0) {
    spdlog::warn("{}: {}", call, std::strerror(rc > 0 ? rc : errno));
  }
}

}  // namespace

ProtectionDomain::ProtectionDomain(ibv_context* context) : pd_(ibv_alloc_pd(context)) {
  if (pd_ == nullptr) {
    throw RdmaError("ibv_alloc_pd", context ? ibv_get_device_name(context->device) : "", errno);
  }
}
ProtectionDomain::~ProtectionDomain() {
  log_teardown("ibv_dealloc_pd", ibv_dealloc_pd(pd_));
}

CompletionChannel::CompletionChannel(ibv_context* context) : channel_(ibv_create_comp_channel(context)) {
  if (channel_ == nullptr) {
    throw RdmaError("ibv_create_comp_channel", "", errno);
  }
}
CompletionChannel::~CompletionChannel() {
  log_teardown("ibv_destroy_comp_channel", ibv_destroy_comp_channel(channel_));
}

CompletionQueue::CompletionQueue(ibv_context* context, int depth, CompletionChannel& channel)
    : cq_(ibv_create_cq(context, depth, nullptr, channel.get(), 0)) {
  if (cq_ == nullptr) {
    throw RdmaError("ibv_create_cq", "depth " + std::to_string(depth), errno);
  }
}
CompletionQueue::~CompletionQueue() {
  log_teardown("ibv_destroy_cq", ibv_destroy_cq(cq_));
}

QueuePair::QueuePair(ibv_pd* pd, ibv_qp_init_attr& attributes) : qp_(ibv_create_qp(pd, &attributes)) {
  if (qp_ == nullptr) {
    throw RdmaError("ibv_create_qp", "", errno);
  }
}
QueuePair::~QueuePair() {
  log_teardown("ibv_destroy_qp", ibv_destroy_qp(qp_));
}

RegisteredBuffer::RegisteredBuffer(ibv_pd* pd, std::size_t size, int access)
    : memory_(new std::byte[size]()), size_(size), mr_(ibv_reg_mr(pd, memory_.get(), size, access)) {
  if (mr_ == nullptr) {
    throw RdmaError("ibv_reg_mr", std::to_string(size) + " bytes", errno);
  }
}
RegisteredBuffer::~RegisteredBuffer() {
  log_teardown("ibv_dereg_mr", ibv_dereg_mr(mr_));
}

AddressHandle::AddressHandle(ibv_pd* pd, ibv_ah_attr& attributes) : ah_(ibv_create_ah(pd, &attributes)) {
  if (ah_ == nullptr) {
    throw RdmaError("ibv_create_ah", "", errno);
  }
}
AddressHandle::AddressHandle(ibv_pd* pd, const ibv_wc& completion, const ibv_grh* grh, std::uint8_t port)
    // ibv_create_ah_from_wc only reads the completion and GRH; its prototype is not const-correct.
    : ah_(ibv_create_ah_from_wc(pd, const_cast<ibv_wc*>(&completion), const_cast<ibv_grh*>(grh), port)) {
  if (ah_ == nullptr) {
    throw RdmaError("ibv_create_ah_from_wc", "QP " + std::to_string(completion.src_qp), errno);
  }
}
AddressHandle::~AddressHandle() {
  log_teardown("ibv_destroy_ah", ibv_destroy_ah(ah_));
}

std::string opcode_name(ibv_wc_opcode opcode) {
  switch (opcode) {
    case IBV_WC_SEND: return "SEND";
    case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
    case IBV_WC_RDMA_READ: return "RDMA_READ";
    case IBV_WC_RECV: return "RECV";
    case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
    default: return "opcode " + std::to_string(static_cast<int>(opcode));
  }
}

}  // namespace rdmakit
