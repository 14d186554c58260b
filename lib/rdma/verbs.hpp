#pragma once
// RAII over libibverbs objects. Constructors throw RdmaError naming the failing call;
// destructors log and never throw.

#include <infiniband/verbs.h>

#include <poll.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lib/base/error.hpp"
#include "lib/rdma/gid.hpp"

namespace rdmakit {

class ProtectionDomain {
 public:
  explicit ProtectionDomain(ibv_context* context);
  ~ProtectionDomain();
  ProtectionDomain(const ProtectionDomain&) = delete;
  ProtectionDomain& operator=(const ProtectionDomain&) = delete;
  ibv_pd* get() const noexcept { return pd_; }

 private:
  ibv_pd* pd_;
};

class CompletionChannel {
 public:
  explicit CompletionChannel(ibv_context* context);
  ~CompletionChannel();
  CompletionChannel(const CompletionChannel&) = delete;
  CompletionChannel& operator=(const CompletionChannel&) = delete;
  ibv_comp_channel* get() const noexcept { return channel_; }
  int fd() const noexcept { return channel_->fd; }

 private:
  ibv_comp_channel* channel_;
};

class CompletionQueue {
 public:
  CompletionQueue(ibv_context* context, int depth, CompletionChannel& channel);
  // An extended CQ (ibv_create_cq_ex), read with ibv_start_poll: `wc_flags` (IBV_WC_EX_WITH_*)
  // names what each completion carries, a completion timestamp among them.
  CompletionQueue(ibv_context* context, int depth, CompletionChannel& channel, std::uint64_t wc_flags);
  ~CompletionQueue();
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;
  ibv_cq* get() const noexcept { return cq_; }
  ibv_cq_ex* extended() const noexcept { return extended_; }  // null when made by ibv_create_cq

 private:
  ibv_cq_ex* extended_ = nullptr;
  ibv_cq* cq_;
};

// A QP made with ibv_create_qp (rping -q); QPs made by rdma_create_qp belong to their cm_id.
// What a QP is asked for. Every rdmakit QP has one CQ for both of its queues and one
// scatter/gather entry a request.
struct QueueShape {
  ibv_qp_type type = IBV_QPT_RC;
  std::uint32_t send_depth = 1;
  std::uint32_t receive_depth = 1;
  bool signal_every_send = false;  // sq_sig_all: a completion for every send, not only the signalled
  std::uint32_t inline_bytes = 0;
};
// The creation attributes of `shape` over `cq` (none: rdma_create_ep makes its own). The one
// place a QP's attributes are filled, whichever call creates it (ibv_create_qp,
// rdma_create_qp, rdma_create_qp_ex, rdma_create_ep).
ibv_qp_init_attr qp_attributes(const QueueShape& shape, ibv_cq* cq);

// A QP's attributes as ibv_query_qp gives them: those of the mask asked for, and those it was
// created with.
struct QpQuery {
  ibv_qp_attr attributes{};
  ibv_qp_init_attr init{};
};
// None when ibv_query_qp fails.
std::optional<QpQuery> query_qp(ibv_qp* qp, int mask);
// Throws RdmaError naming `what` when it fails.
QpQuery query_qp_checked(ibv_qp* qp, int mask, const std::string& what);

class QueuePair {
 public:
  QueuePair(ibv_pd* pd, ibv_qp_init_attr& attributes);
  ~QueuePair();
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;
  ibv_qp* get() const noexcept { return qp_; }

 private:
  ibv_qp* qp_;
};

// Where a registered buffer's memory comes from: the heap, or anonymous huge pages
// (send_bw --use-hugepages: fewer page-table and IOMMU entries for the NIC to walk).
enum class BufferMemory : std::uint8_t { heap, huge_pages };

// Zero-initialised memory registered with one PD.
class RegisteredBuffer {
 public:
  // Zeroed either way. huge_pages: the size rounded up to whole huge pages; throws
  // RdmaError (mmap, with a hint to reserve them) when the kernel has too few.
  RegisteredBuffer(ibv_pd* pd, std::size_t size, int access, BufferMemory memory = BufferMemory::heap);
  // Frees either kind: munmap of `mapped` bytes, or delete[] when nothing was mapped.
  struct Release {
    std::size_t mapped = 0;
    void operator()(std::byte* memory) const noexcept;
  };
  ~RegisteredBuffer();
  RegisteredBuffer(const RegisteredBuffer&) = delete;
  RegisteredBuffer& operator=(const RegisteredBuffer&) = delete;

  std::byte* data() const noexcept { return memory_.get(); }
  char* chars() const noexcept { return reinterpret_cast<char*>(memory_.get()); }
  std::size_t size() const noexcept { return size_; }
  std::span<std::byte> bytes() const noexcept { return {memory_.get(), size_}; }
  std::uint64_t address() const noexcept { return reinterpret_cast<std::uintptr_t>(memory_.get()); }
  std::uint32_t lkey() const noexcept { return mr_->lkey; }
  std::uint32_t rkey() const noexcept { return mr_->rkey; }

 private:
  std::unique_ptr<std::byte, Release> memory_;
  std::size_t size_;
  ibv_mr* mr_;
};

// The kernel's default huge page size (Hugepagesize in /proc/meminfo), 2 MiB if unknown.
std::size_t huge_page_size();

// The RNR NAK timer our connected QPs give their peers: 12 = 0.64 ms, perftest's. The
// kernel's CM leaves 0 there, which the IB encoding reads as 655.36 ms: a receiver that
// ran out of receives once stalled its sender that long (a 64 B send_bw run on rxe went
// from 0.06 s to 0.73 s, and to 26 s with 40 of them).
inline constexpr std::uint8_t rnr_nak_timer = 12;
// Gives an RC `qp`, once in RTS, rnr_nak_timer (an RTS to RTS change); other QP types send
// no RNR NAKs and are left as they are. Every connection path calls it once established.
void keep_rnr_naks_short(ibv_qp* qp);
// What `qp` has there now (ibv_query_qp), for the reports.
std::uint8_t rnr_nak_timer_of(ibv_qp* qp);

// Makes a QP through `create`, which is given the inline size to ask for and throws
// RdmaError if the QP is refused: `wanted` first, then, while the device refuses the size
// (EINVAL, ENOMEM, EOPNOTSUPP), the smaller ones of inline_sizes_to_try down to 0. Returns
// the size the QP was made with; a smaller one than `wanted` is logged, naming `device`.
std::uint32_t create_with_inline(std::uint32_t wanted, const std::function<void(std::uint32_t)>& create,
                                 const std::string& device);

// An address handle for UD sends: from path attributes (a CM event's UD parameters) or
// from a received work completion and its GRH (the reply path).
class AddressHandle {
 public:
  AddressHandle(ibv_pd* pd, ibv_ah_attr& attributes);
  AddressHandle(ibv_pd* pd, const ibv_wc& completion, const ibv_grh* grh, std::uint8_t port);
  ~AddressHandle();
  AddressHandle(const AddressHandle&) = delete;
  AddressHandle& operator=(const AddressHandle&) = delete;
  ibv_ah* get() const noexcept { return ah_; }

 private:
  ibv_ah* ah_;
};

std::string opcode_name(ibv_wc_opcode opcode);

// The CompletionError for a work completion that failed: `message`, and the completion's
// status and vendor error for the report.
CompletionError completion_error(const ibv_wc& completion, const std::string& message);

// IBV_MTU_256 -> 256 ... IBV_MTU_4096 -> 4096.
inline std::uint32_t mtu_bytes(ibv_mtu mtu) {
  return 128U << static_cast<unsigned>(mtu);
}

// Opens a device by name (or the only one when `name` is empty) for a short query; throws
// UsageError naming the devices present when there is no such device, or several to choose from.
class DeviceContext {
 public:
  explicit DeviceContext(const std::string& name);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;
  ibv_context* get() const noexcept { return context_; }
  std::string name() const;

 private:
  ibv_context* context_ = nullptr;
};

// Throws UsageError for an index beyond the table or an unused entry.
GidEntry query_gid(ibv_context* context, std::uint8_t port, std::uint32_t index);
// The port's populated entries, in index order (what send_bw -x checks an index against).
GidPort query_gid_port(ibv_context* context, std::uint8_t port);
std::string gid_type_name(std::uint32_t type);  // "IB", "RoCE v1", "RoCE v2"
std::string gid_text(const ibv_gid& gid);       // IPv6 notation, as sysfs shows it
// The IP address a RoCE GID stands for (IPv4-mapped GIDs give the IPv4 address; link-local
// IPv6 ones carry the netdev as scope), to bind rdma_cm to it.
std::string gid_address(const GidEntry& entry);

}  // namespace rdmakit
