#include "lib/send_bw/loop_support.hpp"

#include <poll.h>

#include <cstring>

#include <fmt/format.h>

namespace rdmakit::loop {

bool is_receive(const ibv_wc& wc) {
  return WorkId::decode(wc.wr_id).kind == WorkKind::receive;
}

bool stop_requested(int stop_fd) {
  if (stop_fd < 0) return false;
  pollfd p{.fd = stop_fd, .events = POLLIN, .revents = 0};
  return poll(&p, 1, 0) > 0;
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

}  // namespace rdmakit::loop
