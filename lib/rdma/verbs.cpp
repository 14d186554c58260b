#include "lib/rdma/verbs.hpp"

#include <arpa/inet.h>
#include <net/if.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"
#include "lib/rdma/device_caps.hpp"

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
  check_pointer(pd_, "ibv_alloc_pd", context ? ibv_get_device_name(context->device) : "");
}
ProtectionDomain::~ProtectionDomain() {
  log_teardown("ibv_dealloc_pd", ibv_dealloc_pd(pd_));
}

CompletionChannel::CompletionChannel(ibv_context* context) : channel_(ibv_create_comp_channel(context)) {
  check_pointer(channel_, "ibv_create_comp_channel", "");
}
CompletionChannel::~CompletionChannel() {
  log_teardown("ibv_destroy_comp_channel", ibv_destroy_comp_channel(channel_));
}

CompletionQueue::CompletionQueue(ibv_context* context, int depth, CompletionChannel& channel)
    : cq_(ibv_create_cq(context, depth, nullptr, channel.get(), 0)) {
  check_pointer(cq_, "ibv_create_cq", "depth " + std::to_string(depth));
}
namespace {

ibv_cq_ex* create_extended_cq(ibv_context* context, int depth, CompletionChannel& channel, std::uint64_t wc_flags) {
  ibv_cq_init_attr_ex attributes{};
  attributes.cqe = static_cast<std::uint32_t>(depth);
  attributes.channel = channel.get();
  attributes.wc_flags = wc_flags;
  auto* cq = ibv_create_cq_ex(context, &attributes);
  check_pointer(cq, "ibv_create_cq_ex", fmt::format("depth {}, completion fields {:#x}", depth, wc_flags));
  return cq;
}

}  // namespace

CompletionQueue::CompletionQueue(ibv_context* context, int depth, CompletionChannel& channel, std::uint64_t wc_flags)
    : extended_(create_extended_cq(context, depth, channel, wc_flags)), cq_(ibv_cq_ex_to_cq(extended_)) {}
CompletionQueue::~CompletionQueue() {
  log_teardown("ibv_destroy_cq", ibv_destroy_cq(cq_));
}

ibv_qp_init_attr qp_attributes(const QueueShape& shape, ibv_cq* cq) {
  ibv_qp_init_attr attributes{};
  attributes.send_cq = cq;
  attributes.recv_cq = cq;
  attributes.qp_type = shape.type;
  attributes.sq_sig_all = shape.signal_every_send ? 1 : 0;
  attributes.cap.max_send_wr = shape.send_depth;
  attributes.cap.max_recv_wr = shape.receive_depth;
  attributes.cap.max_send_sge = 1;
  attributes.cap.max_recv_sge = 1;
  attributes.cap.max_inline_data = shape.inline_bytes;
  return attributes;
}

std::optional<QpQuery> query_qp(ibv_qp* qp, int mask) {
  QpQuery query;
  if (ibv_query_qp(qp, &query.attributes, mask, &query.init) != 0) return std::nullopt;
  return query;
}

QpQuery query_qp_checked(ibv_qp* qp, int mask, const std::string& what) {
  QpQuery query;
  check_returned(ibv_query_qp(qp, &query.attributes, mask, &query.init), "ibv_query_qp", what);
  return query;
}

QueuePair::QueuePair(ibv_pd* pd, ibv_qp_init_attr& attributes) : qp_(ibv_create_qp(pd, &attributes)) {
  check_pointer(qp_, "ibv_create_qp", "");
}
QueuePair::~QueuePair() {
  log_teardown("ibv_destroy_qp", ibv_destroy_qp(qp_));
}

namespace {

// `size` bytes of zeroed memory from where `memory` says.
std::unique_ptr<std::byte, RegisteredBuffer::Release> allocate(std::size_t size, BufferMemory memory) {
  if (memory == BufferMemory::heap) return {new std::byte[size](), RegisteredBuffer::Release{}};
  const auto page = huge_page_size();
  const auto mapped = (size + page - 1) / page * page;
  void* address = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  if (address == MAP_FAILED) {
    throw RdmaError("mmap", fmt::format("{} bytes in {} KiB huge pages", mapped, page / 1024), errno);
  }
  return {static_cast<std::byte*>(address), RegisteredBuffer::Release{.mapped = mapped}};
}

}  // namespace

void RegisteredBuffer::Release::operator()(std::byte* memory) const noexcept {
  if (mapped > 0) {
    munmap(memory, mapped);
  } else {
    delete[] memory;
  }
}

RegisteredBuffer::RegisteredBuffer(ibv_pd* pd, std::size_t size, int access, BufferMemory memory)
    : memory_(allocate(size, memory)), size_(size), mr_(ibv_reg_mr(pd, memory_.get(), size, access)) {
  check_pointer(mr_, "ibv_reg_mr", std::to_string(size) + " bytes");
}

void keep_rnr_naks_short(ibv_qp* qp) {
  if (qp->qp_type != IBV_QPT_RC) return;
  ibv_qp_attr attributes{};
  attributes.min_rnr_timer = rnr_nak_timer;
  const int failed = ibv_modify_qp(qp, &attributes, IBV_QP_MIN_RNR_TIMER);
  if (failed == 0) return;
  // A peer that misbehaves at once (a READ past our buffer as soon as it is connected) can
  // put the QP in the error state before this change: then the change is refused (EINVAL)
  // and the completions that follow say what went wrong, not this.
  ibv_qp_attr now{};
  ibv_qp_init_attr init{};
  if (ibv_query_qp(qp, &now, IBV_QP_STATE, &init) == 0 && now.qp_state == IBV_QPS_ERR) return;
  check_returned(failed, "ibv_modify_qp", fmt::format("RNR NAK timer {}", rnr_nak_timer));
}

std::uint8_t rnr_nak_timer_of(ibv_qp* qp) {
  ibv_qp_attr attributes{};
  ibv_qp_init_attr init{};
  check_returned(ibv_query_qp(qp, &attributes, IBV_QP_MIN_RNR_TIMER, &init), "ibv_query_qp", "its RNR NAK timer");
  return attributes.min_rnr_timer;
}

std::size_t huge_page_size() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  constexpr std::string_view key = "Hugepagesize:";
  while (std::getline(meminfo, line)) {
    if (!line.starts_with(key)) continue;
    const auto digits = line.find_first_not_of(' ', key.size());
    std::size_t kib = 0;
    if (digits != std::string::npos) std::from_chars(line.data() + digits, line.data() + line.size(), kib);
    if (kib > 0) return kib * 1024;
  }
  return std::size_t{2} << 20;
}
RegisteredBuffer::~RegisteredBuffer() {
  log_teardown("ibv_dereg_mr", ibv_dereg_mr(mr_));
}

AddressHandle::AddressHandle(ibv_pd* pd, ibv_ah_attr& attributes) : ah_(ibv_create_ah(pd, &attributes)) {
  check_pointer(ah_, "ibv_create_ah", "");
}
AddressHandle::AddressHandle(ibv_pd* pd, const ibv_wc& completion, const ibv_grh* grh, std::uint8_t port)
    // ibv_create_ah_from_wc only reads the completion and GRH; its prototype is not const-correct.
    : ah_(ibv_create_ah_from_wc(pd, const_cast<ibv_wc*>(&completion), const_cast<ibv_grh*>(grh), port)) {
  check_pointer(ah_, "ibv_create_ah_from_wc", "QP " + std::to_string(completion.src_qp));
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

DeviceContext::DeviceContext(const std::string& name) {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr && errno == ENOSYS) {
    // The kernel has no verbs support at all: no device, as with an empty list.
    throw Unsupported("no RDMA device on this host (ibv_get_device_list: no kernel verbs support)");
  }
  check_pointer(list, "ibv_get_device_list", "");
  std::vector<std::string> names;
  ibv_device* chosen = nullptr;
  for (int i = 0; i < count; ++i) {
    names.emplace_back(ibv_get_device_name(list[i]));
    if (names.back() == name || (name.empty() && count == 1)) chosen = list[i];
  }
  if (chosen != nullptr) context_ = ibv_open_device(chosen);
  const int open_errno = errno;
  ibv_free_device_list(list);
  const std::string present = names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "));
  if (names.empty()) {
    throw Unsupported("no RDMA device on this host (ibv_get_device_list is empty)");
  }
  if (chosen == nullptr) {
    throw UsageError(name.empty() ? fmt::format("several RDMA devices ({}): name one with -d", present)
                                  : fmt::format("no RDMA device {} (present: {})", name, present));
  }
  if (context_ == nullptr) {
    throw RdmaError("ibv_open_device", name, open_errno);
  }
}

DeviceContext::~DeviceContext() {
  log_teardown("ibv_close_device", ibv_close_device(context_));
}

std::string DeviceContext::name() const {
  return ibv_get_device_name(context_->device);
}

CompletionError completion_error(const ibv_wc& completion, const std::string& message) {
  return CompletionError(message, CompletionStatus{.status = static_cast<int>(completion.status),
                                                   .text = ibv_wc_status_str(completion.status),
                                                   .vendor_error = completion.vendor_err});
}

namespace {

GidEntry entry_of(const ibv_gid_entry& entry, std::uint32_t index) {
  char netdev[IF_NAMESIZE] = {};
  if (entry.ndev_ifindex != 0 && if_indextoname(entry.ndev_ifindex, netdev) == nullptr) netdev[0] = '\0';
  return GidEntry{.index = index, .gid = gid_text(entry.gid), .type = gid_type_name(entry.gid_type), .netdev = netdev};
}

}  // namespace

GidEntry query_gid(ibv_context* context, std::uint8_t port, std::uint32_t index) {
  ibv_port_attr port_attributes{};
  check_returned(ibv_query_port(context, port, &port_attributes), "ibv_query_port",
                 ibv_get_device_name(context->device));
  const std::string where = fmt::format("{} port {}", ibv_get_device_name(context->device), port);
  if (index >= static_cast<std::uint32_t>(port_attributes.gid_tbl_len)) {
    throw UsageError(
        fmt::format("GID index {} is outside {}'s table (0..{})", index, where, port_attributes.gid_tbl_len - 1));
  }
  ibv_gid_entry entry{};
  if (const int rc = ibv_query_gid_ex(context, port, index, &entry, 0); rc != 0) {
    // ENODATA: the slot exists but holds no GID.
    throw UsageError(fmt::format("GID index {} of {} is empty{}", index, where,
                                 rc == ENODATA ? "" : fmt::format(" ({})", std::strerror(rc))));
  }
  return entry_of(entry, index);
}

GidPort query_gid_port(ibv_context* context, std::uint8_t port) {
  ibv_port_attr port_attributes{};
  check_returned(ibv_query_port(context, port, &port_attributes), "ibv_query_port",
                 ibv_get_device_name(context->device));
  GidPort table{.device = ibv_get_device_name(context->device), .port = port, .gids = {}};
  // One query per slot rather than ibv_query_gid_table: that one wants room for every port's
  // table at once, and an empty slot here is simply skipped (ENODATA).
  for (int index = 0; index < port_attributes.gid_tbl_len; ++index) {
    ibv_gid_entry entry{};
    const auto slot = static_cast<std::uint32_t>(index);
    if (ibv_query_gid_ex(context, port, slot, &entry, 0) != 0) continue;
    auto gid = entry_of(entry, slot);
    // Older kernels answer an unused slot with the zero GID instead of ENODATA.
    if (gid.gid != "::") table.gids.push_back(std::move(gid));
  }
  return table;
}

std::string gid_type_name(std::uint32_t type) {
  switch (type) {
    case IBV_GID_TYPE_ROCE_V1: return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2: return "RoCE v2";
    default: return "IB";
  }
}

std::string gid_text(const ibv_gid& gid) {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, gid.raw, text, sizeof text);
  return text;
}

std::string gid_address(const GidEntry& entry) {
  auto text = entry_address(entry);
  if (is_link_local(entry) && !entry.netdev.empty()) text += "%" + entry.netdev;
  return text;
}

std::uint32_t create_with_inline(std::uint32_t wanted, const std::function<void(std::uint32_t)>& create,
                                 const std::string& device) {
  const auto sizes = inline_sizes_to_try(wanted);
  for (std::size_t k = 0;; ++k) {
    try {
      create(sizes[k]);
      if (k > 0) {
        spdlog::info("{} refuses {} inline bytes; sending up to {} inline{}", device, wanted, sizes[k],
                     sizes[k] == 0 ? " (none: from registered memory)" : "");
      }
      return sizes[k];
    } catch (const RdmaError& error) {
      const bool refused = error.errnum() == EINVAL || error.errnum() == ENOMEM || error.errnum() == EOPNOTSUPP;
      if (!refused || k + 1 == sizes.size()) throw;
      spdlog::debug("{} inline bytes: {}", sizes[k], error.what());
    }
  }
}

}  // namespace rdmakit
