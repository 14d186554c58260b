#include "lib/bench.hpp"

#include <poll.h>

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "lib/error.hpp"
#include "lib/wait.hpp"

namespace rdmakit {

namespace {

constexpr std::size_t poll_batch = 16;
constexpr std::uint32_t post_batch = 32;
// Empty polls between looks at the clock and the stop signal.
constexpr std::uint32_t spins_between_checks = 1024;

bool stop_requested(int stop_fd) {
  if (stop_fd < 0) return false;
  pollfd p{.fd = stop_fd, .events = POLLIN, .revents = 0};
  return poll(&p, 1, 0) > 0;
}

[[noreturn]] void fail_completion(const ibv_wc& wc, const char* what) {
  throw CompletionError(
      fmt::format("{} completion failed: {} (vendor error {:#x})", what, ibv_wc_status_str(wc.status), wc.vendor_err),
      static_cast<int>(wc.status));
}

ibv_wr_opcode opcode_of(bw::Operation operation) {
  switch (operation) {
    case bw::Operation::write: return IBV_WR_RDMA_WRITE;
    case bw::Operation::read: return IBV_WR_RDMA_READ;
    case bw::Operation::send: break;
  }
  return IBV_WR_SEND;
}

}  // namespace

std::uint32_t signal_interval(std::uint32_t depth) {
  return std::clamp<std::uint32_t>(depth / 2, 1, 64);
}

BandwidthRow stream(const StreamSettings& s, std::uint32_t size, std::uint64_t iterations) {
  const auto opcode = opcode_of(s.operation);
  const bool inline_data = s.operation != bw::Operation::read && size <= s.max_inline_data;
  std::array<ibv_sge, post_batch> sges{};
  std::array<ibv_send_wr, post_batch> wrs{};
  for (std::uint32_t i = 0; i < post_batch; ++i) {
    sges[i] = ibv_sge{.addr = s.local_address, .length = size, .lkey = s.lkey};
    wrs[i].sg_list = &sges[i];
    wrs[i].num_sge = 1;
    wrs[i].opcode = opcode;
    wrs[i].wr.rdma.remote_addr = s.remote_address;
    wrs[i].wr.rdma.rkey = s.rkey;
  }
  std::array<ibv_wc, poll_batch> wcs{};
  std::uint64_t posted = 0;
  std::uint64_t completed = 0;
  std::uint32_t spins = 0;
  auto fastest = std::chrono::nanoseconds::max();
  std::uint64_t fastest_messages = 0;
  const auto started = Clock::now();
  auto last_completion = started;
  auto last_progress = started;
  std::uint64_t completed_at_last = 0;

  while (completed < iterations) {
    while (posted < iterations && posted - completed < s.depth) {
      const auto n = static_cast<std::uint32_t>(
          std::min<std::uint64_t>({post_batch, iterations - posted, s.depth - (posted - completed)}));
      for (std::uint32_t i = 0; i < n; ++i) {
        const std::uint64_t number = posted + i + 1;
        const bool signalled = number % s.signal_every == 0 || number == iterations;
        wrs[i].wr_id = number;
        wrs[i].send_flags = (signalled ? IBV_SEND_SIGNALED : 0) | (inline_data ? IBV_SEND_INLINE : 0);
        wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
      }
      ibv_send_wr* bad = nullptr;
      if (const int rc = ibv_post_send(s.qp, wrs.data(), &bad); rc != 0) {
        throw RdmaError("ibv_post_send", fmt::format("{} x {} bytes", n, size), rc);
      }
      posted += n;
    }
    const int got = ibv_poll_cq(s.cq, static_cast<int>(poll_batch), wcs.data());
    if (got < 0) {
      throw RdmaError("ibv_poll_cq", "", EIO);
    }
    if (got > 0) {
      const auto now = Clock::now();
      for (int k = 0; k < got; ++k) {
        const auto& wc = wcs[static_cast<std::size_t>(k)];
        if (wc.status != IBV_WC_SUCCESS) fail_completion(wc, "send");
        completed = wc.wr_id;  // RC completes in order: every request up to this one is done
      }
      const auto messages = completed - completed_at_last;
      const auto interval = now - last_completion;
      if (completed_at_last > 0 && messages >= s.signal_every && interval < fastest) {
        fastest = interval;
        fastest_messages = messages;
      }
      completed_at_last = completed;
      last_completion = now;
      last_progress = now;
      continue;
    }
    if (++spins % spins_between_checks == 0) {
      if (Clock::now() - last_progress > s.timeout) {
        throw RunStopped(StopReason::timed_out, fmt::format("no completion for {} ms at {} bytes ({} of {} done)",
                                                            s.timeout.count(), size, completed, iterations));
      }
      if (stop_requested(s.stop_fd)) {
        throw RunStopped(StopReason::interrupted, fmt::format("interrupted at {} bytes", size));
      }
    }
  }
  const auto elapsed = last_completion - started;
  if (fastest_messages == 0) fastest = std::chrono::nanoseconds::zero();
  return bandwidth_row(size, iterations, elapsed, fastest, fastest_messages);
}

void sink(const SinkSettings& s, std::vector<BandwidthRow>& rows) {
  ibv_sge sge{.addr = s.address, .length = s.length, .lkey = s.lkey};
  ibv_recv_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  auto post = [&](std::uint32_t count) {
    for (std::uint32_t i = 0; i < count; ++i) {
      ibv_recv_wr* bad = nullptr;
      if (const int rc = ibv_post_recv(s.qp, &wr, &bad); rc != 0) {
        throw RdmaError("ibv_post_recv", "", rc);
      }
    }
  };
  post(s.depth);
  if (s.posted) s.posted();

  struct Run {
    std::uint32_t size = 0;
    std::uint64_t messages = 0;
    Clock::time_point first;
    Clock::time_point last;
  };
  Run run;
  auto close_run = [&] {
    if (run.messages > 0) {
      // From the first arrival to the last: the first message's own transfer is not timed.
      rows.push_back(bandwidth_row(run.size, run.messages, run.last - run.first, {}, 0));
    }
  };
  std::array<ibv_wc, poll_batch> wcs{};
  std::uint32_t spins = 0;
  for (;;) {
    const int got = ibv_poll_cq(s.cq, static_cast<int>(poll_batch), wcs.data());
    if (got < 0) {
      throw RdmaError("ibv_poll_cq", "", EIO);
    }
    if (got > 0) {
      const auto now = Clock::now();
      for (int k = 0; k < got; ++k) {
        const auto& wc = wcs[static_cast<std::size_t>(k)];
        if (wc.status == IBV_WC_WR_FLUSH_ERR) {
          close_run();
          return;  // the peer is gone and our receives were flushed
        }
        if (wc.status != IBV_WC_SUCCESS) fail_completion(wc, "receive");
        if (wc.byte_len != run.size || run.messages == 0) {
          close_run();
          run = Run{.size = wc.byte_len, .messages = 0, .first = now, .last = now};
        }
        ++run.messages;
        run.last = now;
      }
      post(static_cast<std::uint32_t>(got));
      continue;
    }
    if (++spins % spins_between_checks == 0) {
      if (!s.connected()) {
        close_run();
        return;
      }
      if (stop_requested(s.stop_fd)) {
        close_run();
        throw RunStopped(StopReason::interrupted, "interrupted while receiving");
      }
    }
  }
}

}  // namespace rdmakit
