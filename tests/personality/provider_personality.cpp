// A test-only LD_PRELOAD library that gives the real rxe device another provider's limits, so
// that the tools meet, in the guest, what they meet on the hardware our users own. Chosen by
// RDMAKIT_PERSONALITY:
//   cxgb4  Chelsio T5/T6 iWARP (rdma-core providers/cxgb4, the kernel's iw_cxgb4): 8 RDMA
//          READs each way (max_qp_rd_atom, max_qp_init_rd_atom), no atomics, no UD QPs
//          (EOPNOTSUPP), no immediate data (ibv_post_send: EINVAL), and the sink of an RDMA
//          READ must allow remote write (the read response is a tagged write into it).
//   irdma  Intel E810/X722 (providers/irdma): at most 48 bytes inline on some cards; a QP that
//          asks for more is refused (EINVAL).
//   nogrh  InfiniBand inside one subnet: a UD arrival carries no GRH (IBV_WC_GRH clear), so
//          the sender is known only by its LID and QP number. Completions lose the flag; an
//          address handle made from one (ibv_create_ah_from_wc) is made as IB makes it.
//   beatomics  a responder that does its atomics big-endian (ConnectX-3's "reply BE"), as a
//          little-endian requester sees it: what an atomic fetched, and an 8-byte RDMA READ
//          (of a counter), lands byte-swapped. The requester's completions swap it.
//   rawstamps  a device that stamps completions with a raw 48-bit counter and reads it through
//          ibv_query_rt_values_ex, without the provider's nanoseconds (ConnectX-3, mlx4),
//          whose hca_core_clock (156250 kHz) is not the rate its counter keeps (1 GHz), and
//          which wraps 3 s after the process opened the device.
//   wallstamps  the same, but the provider also turns its stamps into nanoseconds
//          (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK, as mlx5 does).
//          rxe stamps nothing: both read the host's clock when the completion is polled.
// Never installed. librdmacm reads the device's limits through ibv_query_device and makes its
// QPs through ibv_create_qp, both exported from libibverbs, so defining them here reaches the
// library and the tools alike; post_send is a context op, replaced on the contexts opened.
// cxgb4's devices also say they are iWARP NICs (node_type IBV_NODE_RNIC, which libibverbs
// reads once to derive transport_type and never again): the tools' capability model sees
// iWARP, while librdmacm, which follows transport_type, still drives rxe's connections as
// InfiniBand transport.
#include <dlfcn.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <vector>

namespace {

enum class Personality { none, cxgb4, irdma, nogrh, beatomics, rawstamps, wallstamps };

Personality chosen() {
  const char* name = std::getenv("RDMAKIT_PERSONALITY");
  if (name == nullptr) return Personality::none;
  if (std::strcmp(name, "cxgb4") == 0) return Personality::cxgb4;
  if (std::strcmp(name, "irdma") == 0) return Personality::irdma;
  if (std::strcmp(name, "nogrh") == 0) return Personality::nogrh;
  if (std::strcmp(name, "beatomics") == 0) return Personality::beatomics;
  if (std::strcmp(name, "rawstamps") == 0) return Personality::rawstamps;
  if (std::strcmp(name, "wallstamps") == 0) return Personality::wallstamps;
  return Personality::none;
}

// The definition after this library's (libibverbs'), as `Function`.
template <typename Function>
Function real(const char* name) {
  void* function = dlsym(RTLD_NEXT, name);
  if (function == nullptr) {
    std::fprintf(stderr, "provider_personality: no %s after this library\n", name);
    std::abort();
  }
  return reinterpret_cast<Function>(function);
}

constexpr int cxgb4_reads = 8;
constexpr std::uint32_t irdma_inline = 48;

void limit_attributes(ibv_device_attr* attr) {
  if (chosen() != Personality::cxgb4) return;
  if (attr->max_qp_rd_atom > cxgb4_reads) attr->max_qp_rd_atom = cxgb4_reads;
  if (attr->max_qp_init_rd_atom > cxgb4_reads) attr->max_qp_init_rd_atom = cxgb4_reads;
  attr->atomic_cap = IBV_ATOMIC_NONE;
}

// The memory regions registered without remote write: an RDMA READ may not land in them.
std::mutex regions_lock;
std::vector<std::uint32_t> local_only_lkeys;

void track(const ibv_mr* mr, unsigned access) {
  if (mr == nullptr || (access & IBV_ACCESS_REMOTE_WRITE) != 0) return;
  const std::lock_guard lock(regions_lock);
  local_only_lkeys.push_back(mr->lkey);
}

bool local_only(std::uint32_t lkey) {
  const std::lock_guard lock(regions_lock);
  for (const auto key : local_only_lkeys) {
    if (key == lkey) return true;
  }
  return false;
}

// The provider's post_send, kept once per process (every context here is rxe's).
int (*provider_post_send)(ibv_qp*, ibv_send_wr*, ibv_send_wr**) = nullptr;

int cxgb4_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  for (ibv_send_wr* request = wr; request != nullptr; request = request->next) {
    const bool immediate = request->opcode == IBV_WR_SEND_WITH_IMM || request->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    const bool atomic = request->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || request->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
    bool sink_refused = false;
    if (request->opcode == IBV_WR_RDMA_READ) {
      for (int k = 0; k < request->num_sge; ++k) sink_refused = sink_refused || local_only(request->sg_list[k].lkey);
    }
    if (immediate || atomic || sink_refused) {
      std::fprintf(stderr, "provider_personality cxgb4: ibv_post_send refuses opcode %d%s\n",
                   static_cast<int>(request->opcode), sink_refused ? " (a READ into memory without remote write)" : "");
      *bad = request;
      return EINVAL;
    }
  }
  return provider_post_send(qp, wr, bad);
}

// nogrh: the provider's ops, kept once per process (every context here is rxe's), each
// wrapped to clear IBV_WC_GRH from what it reports.
int (*provider_poll_cq)(ibv_cq*, int, ibv_wc*) = nullptr;
unsigned (*provider_read_wc_flags)(ibv_cq_ex*) = nullptr;
ibv_cq_ex* (*provider_create_cq_ex)(ibv_context*, ibv_cq_init_attr_ex*) = nullptr;

int poll_cq_without_grh(ibv_cq* cq, int entries, ibv_wc* wc) {
  const int got = provider_poll_cq(cq, entries, wc);
  for (int k = 0; k < got; ++k) wc[k].wc_flags &= ~static_cast<unsigned>(IBV_WC_GRH);
  return got;
}

unsigned read_wc_flags_without_grh(ibv_cq_ex* cq) {
  return provider_read_wc_flags(cq) & ~static_cast<unsigned>(IBV_WC_GRH);
}

ibv_cq_ex* create_cq_ex_without_grh(ibv_context* context, ibv_cq_init_attr_ex* attr) {
  ibv_cq_ex* cq = provider_create_cq_ex(context, attr);
  if (cq != nullptr && cq->read_wc_flags != read_wc_flags_without_grh) {
    provider_read_wc_flags = cq->read_wc_flags;
    cq->read_wc_flags = read_wc_flags_without_grh;
  }
  return cq;
}

// beatomics: where each signalled atomic, and each 8-byte READ, lands (by wr_id), so that its
// completion can swap the 8 bytes. Bounded: an unsignalled request never completes here.
struct Landing {
  std::uint64_t wr_id;
  std::uint64_t address;
};
std::mutex landings_lock;
std::vector<Landing> landings;
constexpr std::size_t max_landings = 4096;

int post_send_recording_landings(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  {
    const std::lock_guard lock(landings_lock);
    for (ibv_send_wr* request = wr; request != nullptr; request = request->next) {
      const bool atomic =
          request->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || request->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
      const bool counter_read =
          request->opcode == IBV_WR_RDMA_READ && request->num_sge == 1 && request->sg_list[0].length == 8;
      if (!atomic && !counter_read) continue;
      if (landings.size() >= max_landings) landings.erase(landings.begin());
      landings.push_back({request->wr_id, request->sg_list[0].addr});
    }
  }
  return provider_post_send(qp, wr, bad);
}

int poll_cq_swapping_atomics(ibv_cq* cq, int entries, ibv_wc* wc) {
  const int got = provider_poll_cq(cq, entries, wc);
  for (int k = 0; k < got; ++k) {
    const auto opcode = wc[k].opcode;
    if (wc[k].status != IBV_WC_SUCCESS ||
        (opcode != IBV_WC_FETCH_ADD && opcode != IBV_WC_COMP_SWAP && opcode != IBV_WC_RDMA_READ)) {
      continue;
    }
    const std::lock_guard lock(landings_lock);
    for (auto it = landings.begin(); it != landings.end(); ++it) {
      if (it->wr_id != wc[k].wr_id) continue;
      auto* value = reinterpret_cast<std::uint64_t*>(it->address);
      *value = __builtin_bswap64(*value);
      landings.erase(it);
      break;
    }
  }
  return got;
}

// rawstamps, wallstamps: the device's counter, CLOCK_MONOTONIC's nanoseconds from an origin
// chosen so that the 48-bit counter wraps 3 s after the device was opened.
constexpr std::uint64_t counter_mask = (std::uint64_t{1} << 48) - 1;
constexpr std::uint64_t reported_core_clock_khz = 156250;
std::uint64_t counter_origin = 0;

std::uint64_t clock_ns(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000U + static_cast<std::uint64_t>(now.tv_nsec);
}

std::uint64_t counter_now() {
  return (clock_ns(CLOCK_MONOTONIC) - counter_origin) & counter_mask;
}

int (*provider_query_device_ex)(ibv_context*, const ibv_query_device_ex_input*, ibv_device_attr_ex*, size_t) = nullptr;

int query_device_ex_with_stamps(ibv_context* context, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                                size_t size) {
  const int rc = provider_query_device_ex(context, input, attr, size);
  if (rc == 0) {
    attr->completion_timestamp_mask = counter_mask;
    attr->hca_core_clock = reported_core_clock_khz;
  }
  return rc;
}

int query_rt_values_of_counter(ibv_context*, ibv_values_ex* values) {
  if ((values->comp_mask & ~static_cast<std::uint32_t>(IBV_VALUES_MASK_RAW_CLOCK)) != 0) return EINVAL;
  values->raw_clock.tv_sec = 0;
  values->raw_clock.tv_nsec = static_cast<long>(counter_now());
  values->comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
  return 0;
}

std::uint64_t read_counter_stamp(ibv_cq_ex*) {
  return counter_now();
}
std::uint64_t read_wallclock_stamp(ibv_cq_ex*) {
  return clock_ns(CLOCK_REALTIME);
}

ibv_cq_ex* create_cq_ex_with_stamps(ibv_context* context, ibv_cq_init_attr_ex* attr) {
  const std::uint64_t stamps = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
  const std::uint64_t asked = attr->wc_flags & stamps;
  if ((asked & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK) != 0 && chosen() == Personality::rawstamps) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  ibv_cq_init_attr_ex without = *attr;
  without.wc_flags &= ~stamps;
  ibv_cq_ex* cq = provider_create_cq_ex(context, &without);
  if (cq == nullptr) return nullptr;
  if ((asked & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) != 0) cq->read_completion_ts = read_counter_stamp;
  if ((asked & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK) != 0)
    cq->read_completion_wallclock_ns = read_wallclock_stamp;
  return cq;
}

void give_stamps(ibv_context* context) {
  verbs_context* extended = verbs_get_ctx(context);
  if (extended == nullptr || extended->create_cq_ex == nullptr || extended->query_device_ex == nullptr) return;
  if (counter_origin == 0) counter_origin = clock_ns(CLOCK_MONOTONIC) + 3'000'000'000U - counter_mask - 1;
  if (extended->create_cq_ex != create_cq_ex_with_stamps) {
    provider_create_cq_ex = extended->create_cq_ex;
    extended->create_cq_ex = create_cq_ex_with_stamps;
  }
  if (extended->query_device_ex != query_device_ex_with_stamps) {
    provider_query_device_ex = extended->query_device_ex;
    extended->query_device_ex = query_device_ex_with_stamps;
  }
  extended->query_rt_values = query_rt_values_of_counter;
}

}  // namespace

extern "C" ibv_context* ibv_open_device(ibv_device* device) {
  static const auto next = real<ibv_context* (*)(ibv_device*)>("ibv_open_device");
  ibv_context* context = next(device);
  if (context != nullptr && chosen() == Personality::beatomics && context->ops.poll_cq != poll_cq_swapping_atomics) {
    provider_poll_cq = context->ops.poll_cq;
    context->ops.poll_cq = poll_cq_swapping_atomics;
  }
  if (context != nullptr && (chosen() == Personality::rawstamps || chosen() == Personality::wallstamps)) {
    give_stamps(context);
  }
  if (context == nullptr || chosen() != Personality::nogrh) return context;
  if (context->ops.poll_cq != poll_cq_without_grh) {
    provider_poll_cq = context->ops.poll_cq;
    context->ops.poll_cq = poll_cq_without_grh;
  }
  verbs_context* extended = verbs_get_ctx(context);
  if (extended != nullptr && extended->create_cq_ex != nullptr && extended->create_cq_ex != create_cq_ex_without_grh) {
    provider_create_cq_ex = extended->create_cq_ex;
    extended->create_cq_ex = create_cq_ex_without_grh;
  }
  return context;
}

extern "C" ibv_device** ibv_get_device_list(int* count) {
  static const auto next = real<ibv_device** (*)(int*)>("ibv_get_device_list");
  ibv_device** devices = next(count);
  if (devices != nullptr && chosen() == Personality::cxgb4) {
    for (ibv_device** device = devices; *device != nullptr; ++device) (*device)->node_type = IBV_NODE_RNIC;
  }
  return devices;
}

extern "C" int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
  static const auto next = real<int (*)(ibv_context*, ibv_device_attr*)>("ibv_query_device");
  const int rc = next(context, attr);
  if (rc == 0) limit_attributes(attr);
  return rc;
}

#undef ibv_reg_mr
extern "C" ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  static const auto next = real<ibv_mr* (*)(ibv_pd*, void*, size_t, int)>("ibv_reg_mr");
  ibv_mr* mr = next(pd, addr, length, access);
  track(mr, static_cast<unsigned>(access));
  return mr;
}

extern "C" ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) {
  static const auto next = real<ibv_mr* (*)(ibv_pd*, void*, size_t, uint64_t, unsigned)>("ibv_reg_mr_iova2");
  ibv_mr* mr = next(pd, addr, length, iova, access);
  track(mr, access);
  return mr;
}

// nogrh: InfiniBand makes a reply's address handle from the completion's source LID and QP,
// GRH or not; rxe, a RoCE device, needs the GRH, which it did write into the receive buffer.
// The flag is given back for this call alone, so the reply path runs as it does on IB.
extern "C" ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  static const auto next = real<ibv_ah* (*)(ibv_pd*, ibv_wc*, ibv_grh*, uint8_t)>("ibv_create_ah_from_wc");
  if (chosen() != Personality::nogrh || (wc->wc_flags & IBV_WC_GRH) != 0) return next(pd, wc, grh, port_num);
  ibv_wc with_grh = *wc;
  with_grh.wc_flags |= IBV_WC_GRH;
  return next(pd, &with_grh, grh, port_num);
}

extern "C" ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  static const auto next = real<ibv_qp* (*)(ibv_pd*, ibv_qp_init_attr*)>("ibv_create_qp");
  const Personality personality = chosen();
  if (personality == Personality::cxgb4 && attr->qp_type == IBV_QPT_UD) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if (personality == Personality::irdma && attr->cap.max_inline_data > irdma_inline) {
    errno = EINVAL;
    return nullptr;
  }
  ibv_qp* qp = next(pd, attr);
  if (qp != nullptr && personality == Personality::cxgb4 && qp->context->ops.post_send != cxgb4_post_send) {
    provider_post_send = qp->context->ops.post_send;
    qp->context->ops.post_send = cxgb4_post_send;
  }
  if (qp != nullptr && personality == Personality::beatomics &&
      qp->context->ops.post_send != post_send_recording_landings) {
    provider_post_send = qp->context->ops.post_send;
    qp->context->ops.post_send = post_send_recording_landings;
  }
  return qp;
}
