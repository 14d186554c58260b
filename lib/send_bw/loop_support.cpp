#include "lib/send_bw/loop_support.hpp"

#include <poll.h>

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "lib/base/wait.hpp"

namespace rdmakit::loop {

bool is_receive(const ibv_wc& wc) {
  return WorkId::decode(wc.wr_id).kind == WorkKind::receive;
}

bool stop_requested(int stop_fd) {
  return stop_fd >= 0 && await_events(stop_fd, POLLIN, -1, Clock::now()) == SocketWait::ready;
}

[[noreturn]] void fail_completion(const ibv_wc& wc) {
  const char* what = is_receive(wc) ? "receive" : "send";
  throw completion_error(wc, fmt::format("{} completion failed: {} (vendor error {:#x})", what,
                                         ibv_wc_status_str(wc.status), wc.vendor_err));
}

bool is_datagram_counts(const ibv_wc& wc) {
  return (wc.wc_flags & IBV_WC_WITH_IMM) != 0 && wc.imm_data == bw::datagram_end_imm();
}

ibv_grh received_grh(const Lane& lane) {
  ibv_grh grh{};
  std::memcpy(&grh, reinterpret_cast<const void*>(lane.receive_address), sizeof grh);
  return grh;
}

void fail_poll(int returned) {
  throw RdmaError::without_errno("ibv_poll_cq", "", fmt::format("returned {}", returned));
}

void fail_post(int returned, std::uint32_t size) {
  // The subject is built only here, on failure: post() is in the measured loop.
  check_returned(returned, "ibv_post_send", fmt::format("{} bytes", size));
}

ibv_wr_opcode opcode_of(bw::Operation operation, const AtomicCounters* atomics) {
  switch (operation) {
    case bw::Operation::write: return IBV_WR_RDMA_WRITE;
    case bw::Operation::read: return IBV_WR_RDMA_READ;
    case bw::Operation::atomic:
      if (atomics == nullptr) throw std::logic_error("--op atomic without its counters");
      return atomics->kind == AtomicKind::fetch_add ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
    case bw::Operation::send: break;
  }
  return IBV_WR_SEND;
}

AtomicOperands atomic_operands(ibv_wr_opcode opcode, std::uint64_t count) {
  if (opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) return {.compare_add = 1, .swap = 0};
  return {.compare_add = count, .swap = count + 1};
}

std::optional<std::uint32_t> take_datagram(const Lane& lane, const ibv_wc& wc, DatagramTally& tally) {
  if (wc.byte_len < grh_bytes) {
    throw ProtocolError(fmt::format("a {}-byte datagram is shorter than its GRH", wc.byte_len));
  }
  const std::uint32_t size = wc.byte_len - grh_bytes;
  if (loop::is_datagram_counts(wc)) {
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(lane.receive_address);
    tally.end.emplace(bytes + grh_bytes, bytes + grh_bytes + size);
    tally.end_completion = wc;
    tally.end_grh = loop::received_grh(lane);
    return std::nullopt;
  }
  if (tally.received.empty() || tally.received.back().size != size) {
    tally.received.push_back({.size = size, .count = 0});
  }
  ++tally.received.back().count;
  return size;
}

}  // namespace rdmakit::loop
