#include "lib/bench/loops.hpp"

#include <arpa/inet.h>
#include <poll.h>

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "lib/core/error.hpp"
#include "lib/core/wait.hpp"
#include "lib/rdma/verbs.hpp"

namespace rdmakit {

namespace {

constexpr std::size_t poll_batch = 16;
constexpr std::uint32_t post_batch = 32;
// Empty polls between looks at the clock and the stop signal.
constexpr std::uint32_t spins_between_checks = 1024;
constexpr std::uint64_t bytes_between_signals = 16u << 20;
// Receives carry this id, so a completion tells its kind even when its status is an error
// (an error completion's opcode is undefined); sends carry their sequence number.
constexpr std::uint64_t receive_id = std::numeric_limits<std::uint64_t>::max();

bool stop_requested(int stop_fd) {
  if (stop_fd < 0) return false;
  pollfd p{.fd = stop_fd, .events = POLLIN, .revents = 0};
  return poll(&p, 1, 0) > 0;
}

[[noreturn]] void fail_completion(const ibv_wc& wc) {
  const char* what = wc.wr_id == receive_id ? "receive" : "send";
  throw completion_error(wc, fmt::format("{} completion failed: {} (vendor error {:#x})", what,
                                         ibv_wc_status_str(wc.status), wc.vendor_err));
}

ibv_wr_opcode opcode_of(bw::Operation operation) {
  switch (operation) {
    case bw::Operation::write: return IBV_WR_RDMA_WRITE;
    case bw::Operation::read: return IBV_WR_RDMA_READ;
    case bw::Operation::send: break;
  }
  return IBV_WR_SEND;
}

int poll_lane(const Lane& lane, std::array<ibv_wc, poll_batch>& wcs) {
  const int got = ibv_poll_cq(lane.cq, static_cast<int>(poll_batch), wcs.data());
  if (got < 0) {
    throw RdmaError::without_errno("ibv_poll_cq", "", fmt::format("returned {}", got));
  }
  return got;
}

void post(ibv_qp* qp, ibv_send_wr* wr, std::uint32_t size) {
  ibv_send_wr* bad = nullptr;
  // The subject is built only on failure: this is the measured loop.
  if (const int rc = ibv_post_send(qp, wr, &bad); rc != 0) [[unlikely]] {
    check_returned(rc, "ibv_post_send", fmt::format("{} bytes", size));
  }
}

// Says when an idle loop should look at the clock, the stop signal and the connection:
// every spins_between_checks empty polls, and then only if checks_apart has passed, so the
// system calls behind those looks stay off the path of a latency measurement.
class SpinGuard {
 public:
  explicit SpinGuard(int stop_fd) : stop_fd_(stop_fd) {}
  bool due() {
    if (++spins_ % spins_between_checks != 0) return false;
    const auto now = Clock::now();
    if (now - last_check_ < checks_apart) return false;
    last_check_ = now;
    return true;
  }
  void check_stop(const std::string& where) const {
    if (stop_requested(stop_fd_)) {
      throw RunStopped(StopReason::interrupted, "interrupted " + where);
    }
  }

 private:
  static constexpr auto checks_apart = std::chrono::milliseconds(20);
  int stop_fd_;
  std::uint32_t spins_ = 0;
  Clock::time_point last_check_ = Clock::now();
};

std::uint64_t round_up(std::uint64_t value, std::uint64_t step) {
  return (value + step - 1) / step * step;
}

}  // namespace

void post_receives(const Lane& lane, std::uint32_t count) {
  ibv_sge sge{.addr = lane.receive_address, .length = lane.receive_length, .lkey = lane.receive_lkey};
  ibv_recv_wr wr{};
  wr.wr_id = receive_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  for (std::uint32_t i = 0; i < count; ++i) {
    ibv_recv_wr* bad = nullptr;
    check_returned(ibv_post_recv(lane.qp, &wr, &bad), "ibv_post_recv", "");
  }
}

std::uint32_t signal_interval(std::uint32_t depth) {
  return std::clamp<std::uint32_t>(depth / 2, 1, 64);
}

// NOLINTNEXTLINE(readability-function-cognitive-complexity): 88 today, above the cap of 25; to split
void stream(const StreamSettings& s, std::uint32_t size, const Budget& budget, std::vector<BandwidthRow>& rows) {
  struct Progress {
    std::uint64_t posted = 0;
    std::uint64_t completed = 0;
    std::uint64_t received = 0;
    std::uint64_t target = 0;
  };
  const auto opcode = opcode_of(s.operation);
  const bool inline_data = s.operation != bw::Operation::read && size <= s.max_inline_data;
  // Large messages are signalled more often, so a silent CQ never means more than
  // bytes_between_signals in flight (and the silence timeout stays meaningful).
  const auto signal_every =
      static_cast<std::uint32_t>(std::clamp<std::uint64_t>(bytes_between_signals / size, 1, s.signal_every));
  std::array<ibv_sge, post_batch> sges{};
  std::array<ibv_send_wr, post_batch> wrs{};
  std::vector<Progress> lanes(s.lanes.size());
  for (auto& lane : lanes) {
    lane.target = budget.duration ? std::numeric_limits<std::uint64_t>::max() : budget.iterations;
  }
  std::array<ibv_wc, poll_batch> wcs{};
  SpinGuard spin(s.stop_fd);
  // Peak: the best rate over a window of at least one signalling interval per lane.
  const std::uint64_t window_messages = std::uint64_t{signal_every} * s.lanes.size();
  auto fastest = std::chrono::nanoseconds::zero();
  std::uint64_t fastest_messages = 0;
  std::uint64_t total = 0;
  const auto started = Clock::now();
  const auto ends = started + budget.duration.value_or(std::chrono::nanoseconds::zero());
  bool open_ended = budget.duration.has_value();
  auto last_completion = started;
  auto window_started = started;
  std::uint64_t window_start_total = 0;

  auto finished = [&] {
    return std::all_of(lanes.begin(), lanes.end(), [&](const Progress& p) {
      return p.completed == p.target && (!s.bidirectional || p.received >= p.target);
    });
  };
  auto close_budget = [&] {
    // Time is up: finish at the next signalled request, so the last completion still comes.
    for (auto& p : lanes) p.target = round_up(p.posted, signal_every);
    open_ended = false;
  };

  auto row = [&] {
    std::uint64_t messages = 0;
    for (const auto& p : lanes) messages += std::min(p.completed, p.target) + (s.bidirectional ? p.received : 0);
    return bandwidth_row(size, messages, last_completion - started, fastest, fastest_messages);
  };
  try {
    while (!finished()) {
      bool progress = false;
      for (std::size_t l = 0; l < s.lanes.size(); ++l) {
        const Lane& lane = s.lanes[l];
        Progress& p = lanes[l];
        while (p.posted < p.target && p.posted - p.completed < s.depth) {
          const auto n = static_cast<std::uint32_t>(
              std::min<std::uint64_t>({post_batch, p.target - p.posted, s.depth - (p.posted - p.completed)}));
          for (std::uint32_t i = 0; i < n; ++i) {
            const std::uint64_t number = p.posted + i + 1;
            const bool signalled = number % signal_every == 0 || number == p.target;
            sges[i] = ibv_sge{.addr = lane.local_address, .length = size, .lkey = lane.lkey};
            wrs[i].sg_list = &sges[i];
            wrs[i].num_sge = 1;
            wrs[i].opcode = opcode;
            wrs[i].wr.rdma.remote_addr = lane.remote_address;
            wrs[i].wr.rdma.rkey = lane.rkey;
            wrs[i].wr_id = number;
            wrs[i].send_flags = (signalled ? IBV_SEND_SIGNALED : 0) | (inline_data ? IBV_SEND_INLINE : 0);
            wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
          }
          post(lane.qp, wrs.data(), size);
          p.posted += n;
        }
        const int got = poll_lane(lane, wcs);
        if (got == 0) continue;
        progress = true;
        std::uint32_t receives = 0;
        for (int k = 0; k < got; ++k) {
          const auto& wc = wcs[static_cast<std::size_t>(k)];
          if (wc.status != IBV_WC_SUCCESS) fail_completion(wc);
          if (wc.wr_id == receive_id) {
            ++receives;
            ++total;
          } else {
            total += wc.wr_id - p.completed;
            p.completed = wc.wr_id;  // RC completes in order: every request up to this one is done
          }
        }
        if (receives > 0) {
          p.received += receives;
          post_receives(lane, receives);
        }
      }
      if (progress) {
        const auto now = Clock::now();
        if (total - window_start_total >= window_messages) {
          const auto interval = now - window_started;
          const auto messages = total - window_start_total;
          // messages / interval > fastest_messages / fastest, without division.
          if (fastest_messages == 0 || messages * static_cast<std::uint64_t>(fastest.count()) >
                                           fastest_messages * static_cast<std::uint64_t>(interval.count())) {
            fastest = interval;
            fastest_messages = messages;
          }
          window_started = now;
          window_start_total = total;
        }
        last_completion = now;
        if (open_ended && now >= ends) close_budget();
        continue;
      }
      if (spin.due()) {
        const auto now = Clock::now();
        if (open_ended && now >= ends) close_budget();
        if (now - last_completion > s.timeout) {
          std::uint64_t completed = 0;
          for (const auto& p : lanes) completed += p.completed;
          throw RunStopped(StopReason::timed_out, fmt::format("no completion for {} ms at {} bytes ({} messages done)",
                                                              s.timeout.count(), size, completed));
        }
        spin.check_stop(fmt::format("at {} bytes", size));
      }
    }
  } catch (...) {
    if (total > 0) rows.push_back(row());
    throw;
  }
  rows.push_back(row());
}

// NOLINTNEXTLINE(readability-function-cognitive-complexity): 64 today, above the cap of 25; to split
void sink(const SinkSettings& s, std::vector<BandwidthRow>& rows) {
  struct Run {
    std::uint64_t messages = 0;
    Clock::time_point first;
    Clock::time_point last;
  };
  struct Reflection {
    bool closed = false;
    std::uint64_t owed = 0;  // messages received and not yet sent back
    std::uint32_t owed_size = 0;
    std::uint64_t posted = 0;
    std::uint64_t completed = 0;
  };
  std::map<std::uint32_t, Run> runs;  // a sweep never repeats a size
  auto close_runs = [&] {
    for (const auto& [size, run] : runs) {
      // From the first arrival to the last: the first message's own transfer is not timed.
      rows.push_back(bandwidth_row(size, run.messages, run.last - run.first, {}, 0));
    }
    runs.clear();
  };
  std::vector<Reflection> lanes(s.lanes.size());
  const std::uint32_t signal_every = signal_interval(s.depth);
  std::array<ibv_wc, poll_batch> wcs{};
  ibv_sge sge{};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  SpinGuard spin(s.stop_fd);
  std::optional<Clock::time_point> drain_until;  // set once the peer has gone
  try {
    for (;;) {
      bool progress = false;
      for (std::size_t l = 0; l < s.lanes.size(); ++l) {
        const Lane& lane = s.lanes[l];
        Reflection& r = lanes[l];
        if (r.closed) continue;
        const int got = poll_lane(lane, wcs);
        const auto now = Clock::now();
        std::uint32_t receives = 0;
        for (int k = 0; k < got; ++k) {
          const auto& wc = wcs[static_cast<std::size_t>(k)];
          if (wc.status == IBV_WC_WR_FLUSH_ERR) {
            r.closed = true;  // the peer is gone and our work requests were flushed
            break;
          }
          if (wc.status != IBV_WC_SUCCESS) fail_completion(wc);
          if (wc.wr_id != receive_id) {
            r.completed = wc.wr_id;
            continue;
          }
          ++receives;
          auto [run, fresh] = runs.try_emplace(wc.byte_len, Run{.messages = 0, .first = now, .last = now});
          ++run->second.messages;
          run->second.last = now;
          if (s.reflect) {
            if (r.owed > 0 && r.owed_size != wc.byte_len) {
              throw ProtocolError(fmt::format("the client moved to {}-byte messages with {} {}-byte ones unanswered",
                                              wc.byte_len, r.owed, r.owed_size));
            }
            r.owed_size = wc.byte_len;
            ++r.owed;
          }
        }
        if (r.closed) continue;
        if (got > 0) progress = true;
        if (receives > 0) post_receives(lane, receives);
        while (r.owed > 0 && r.posted - r.completed < s.depth) {
          const std::uint64_t number = r.posted + 1;
          sge = ibv_sge{.addr = lane.local_address, .length = r.owed_size, .lkey = lane.lkey};
          wr.wr_id = number;
          wr.send_flags = (number % signal_every == 0 || r.owed == 1 ? IBV_SEND_SIGNALED : 0) |
                          (r.owed_size <= s.max_inline_data ? IBV_SEND_INLINE : 0);
          post(lane.qp, &wr, r.owed_size);
          r.posted = number;
          --r.owed;
        }
      }
      if (std::all_of(lanes.begin(), lanes.end(), [](const Reflection& r) { return r.closed; })) break;
      if (!progress && spin.due()) {
        // The peer's DISCONNECTED can overtake the completions of what it sent just before
        // (a server counted 292 of 300 beside a busy guest): go on polling until the flushed
        // receives close every lane, for a second at most.
        if (!drain_until && !s.connected()) drain_until = Clock::now() + std::chrono::seconds(1);
        if (drain_until && Clock::now() >= *drain_until) break;
        spin.check_stop("while receiving");
      }
    }
  } catch (...) {
    close_runs();
    throw;
  }
  close_runs();
}

namespace {

// The control message of the latency test: a zero-length SEND with the size as immediate.
void post_size(const Lane& lane, std::uint32_t size) {
  ibv_send_wr wr{};
  wr.wr_id = 0;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = bw::encode_size_announcement(size);
  wr.send_flags = IBV_SEND_SIGNALED;
  post(lane.qp, &wr, 0);
}

volatile std::uint8_t& last_byte(std::uint64_t address, std::uint32_t size) {
  return *reinterpret_cast<volatile std::uint8_t*>(address + size - 1);
}

// Sends in a latency loop, signalled one in latency_signal_every so the send queue drains.
class PingPoster {
 public:
  // `generation` tells this poster's completions from those of an earlier one on the same
  // queue (the previous size's last signalled send may complete after it has gone).
  PingPoster(const Lane& lane, bw::Operation operation, std::uint32_t max_inline_data, std::uint32_t generation)
      : lane_(lane), max_inline_data_(max_inline_data), generation_(std::uint64_t{generation} << 32) {
    wr_.sg_list = &sge_;
    wr_.num_sge = 1;
    wr_.opcode = opcode_of(operation);
  }
  void post_from(std::uint64_t address, std::uint32_t lkey, std::uint32_t size, std::uint64_t remote_address,
                 std::uint32_t rkey, bool always_signal) {
    sge_ = ibv_sge{.addr = address, .length = size, .lkey = lkey};
    wr_.wr.rdma.remote_addr = remote_address;
    wr_.wr.rdma.rkey = rkey;
    wr_.wr_id = generation_ | ++posted_;
    const bool signalled = always_signal || posted_ % latency_signal_every == 0;
    wr_.send_flags = (signalled ? IBV_SEND_SIGNALED : 0) |
                     (wr_.opcode != IBV_WR_RDMA_READ && size <= max_inline_data_ ? IBV_SEND_INLINE : 0);
    post(lane_.qp, &wr_, size);
  }
  // Records a completion of ours; the signalled ones free the send queue up to them.
  void reaped(const ibv_wc& wc) {
    if (wc.wr_id != receive_id && (wc.wr_id & ~sequence_mask) == generation_) {
      completed_ = std::max(completed_, wc.wr_id & sequence_mask);
    }
  }
  // Time to poll: two signalling intervals of sends are unaccounted for.
  bool backlog() const { return posted_ - completed_ >= 2 * latency_signal_every; }

 private:
  const Lane& lane_;
  static constexpr std::uint64_t sequence_mask = 0xffffffffu;
  std::uint32_t max_inline_data_;
  std::uint64_t generation_;
  ibv_sge sge_{};
  ibv_send_wr wr_{};
  std::uint64_t posted_ = 0;
  std::uint64_t completed_ = 0;
};

}  // namespace

// NOLINTNEXTLINE(readability-function-cognitive-complexity): 80 today, above the cap of 25; to split
void ping(const PingSettings& s, std::uint32_t size, const Budget& budget, std::uint64_t warmup,
          std::vector<LatencyRow>& rows) {
  const Lane& lane = s.lane;
  PingPoster poster(lane, s.operation, s.max_inline_data, size);
  std::array<ibv_wc, poll_batch> wcs{};
  SpinGuard spin(s.stop_fd);
  auto last_progress = Clock::now();
  const auto where = fmt::format("at {} bytes", size);
  // Polls until `done` says the awaited completion arrived and returns when it was seen;
  // reposting receives and bookkeeping come after that instant. Bounded by the timeout.
  // NOLINTNEXTLINE(readability-function-cognitive-complexity): 27 today, above the cap of 25; to split
  auto await = [&](auto done, const char* awaiting) -> Clock::time_point {
    for (;;) {
      const int got = poll_lane(lane, wcs);
      bool arrived = false;  // the whole batch is handled: a later completion may be a receive to repost
      std::uint32_t receives = 0;
      for (int k = 0; k < got; ++k) {
        const auto& wc = wcs[static_cast<std::size_t>(k)];
        if (wc.status != IBV_WC_SUCCESS) fail_completion(wc);
        arrived = done(wc) || arrived;
        if (wc.wr_id == receive_id) ++receives;
      }
      if (got > 0) {
        const auto seen = Clock::now();
        for (int k = 0; k < got; ++k) poster.reaped(wcs[static_cast<std::size_t>(k)]);
        if (receives > 0) post_receives(lane, receives);
        if (arrived) {
          last_progress = seen;
          return seen;
        }
      }
      if (got == 0 && spin.due()) {
        if (Clock::now() - last_progress > s.timeout) {
          throw RunStopped(StopReason::timed_out,
                           fmt::format("no {} for {} ms at {} bytes", awaiting, s.timeout.count(), size));
        }
        spin.check_stop(where);
      }
    }
  };

  // One look at the CQ without waiting: an error completion throws, the rest are reaped.
  // The write test does this while it watches its buffer for the answer, so a write the
  // server refused (an rkey or address in its answer that is not its buffer) ends the
  // run with that error instead of a timeout.
  auto reap = [&] {
    const int got = poll_lane(lane, wcs);
    std::uint32_t receives = 0;
    for (int k = 0; k < got; ++k) {
      const auto& wc = wcs[static_cast<std::size_t>(k)];
      if (wc.status != IBV_WC_SUCCESS) fail_completion(wc);
      poster.reaped(wc);
      if (wc.wr_id == receive_id) ++receives;
    }
    if (receives > 0) post_receives(lane, receives);
  };

  post_size(lane, size);
  await(
      [&](const ibv_wc& wc) {
        if (wc.wr_id != receive_id) return false;
        if ((wc.wc_flags & IBV_WC_WITH_IMM) == 0 || ntohl(wc.imm_data) != size) {
          throw ProtocolError(fmt::format("the server answered the {}-byte announcement with something else", size));
        }
        return true;
      },
      "answer to the size announcement");

  std::uint8_t tag = 0;
  if (s.operation == bw::Operation::write) last_byte(lane.receive_address, size) = 0;
  // One exchange; returns its duration.
  auto exchange = [&]() -> std::chrono::nanoseconds {
    const auto started = Clock::now();
    switch (s.operation) {
      case bw::Operation::send:
        poster.post_from(lane.local_address, lane.lkey, size, 0, 0, false);
        return await([](const ibv_wc& wc) { return wc.wr_id == receive_id; }, "answer") - started;
      case bw::Operation::read:
        poster.post_from(lane.local_address, lane.lkey, size, lane.remote_address, lane.rkey, true);
        return await([](const ibv_wc& wc) { return wc.wr_id != receive_id && wc.opcode == IBV_WC_RDMA_READ; },
                     "read completion") -
               started;
      case bw::Operation::write: {
        tag = static_cast<std::uint8_t>(tag % 255 + 1);  // 1..255: never the 0 both sides start from
        last_byte(lane.local_address, size) = tag;
        poster.post_from(lane.local_address, lane.lkey, size, lane.remote_address, lane.rkey, false);
        const auto& answer = last_byte(lane.receive_address, size);
        while (answer != tag) {
          if (spin.due()) {
            reap();
            if (Clock::now() - started > s.timeout) {
              throw RunStopped(StopReason::timed_out,
                               fmt::format("no answering write for {} ms at {} bytes", s.timeout.count(), size));
            }
            spin.check_stop(where);
          }
        }
        const auto took = Clock::now() - started;
        // Untimed: reap our signalled writes (and see their errors) before the queue fills.
        while (poster.backlog()) await([](const ibv_wc& wc) { return wc.wr_id != receive_id; }, "write completion");
        return took;
      }
    }
    return Clock::now() - started;
  };

  for (std::uint64_t i = 0; i < warmup; ++i) exchange();
  LatencyRecorder recorder;
  auto row = [&] { return LatencyRow{.size = size, .summary = recorder.summary().value_or(LatencySummary{})}; };
  const bool halve = s.operation != bw::Operation::read;
  // Beyond a million samples the recorder grows (rarely, doubling) rather than reserve gigabytes.
  recorder.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(budget.iterations, std::uint64_t{1} << 20)));
  const auto ends = Clock::now() + budget.duration.value_or(std::chrono::nanoseconds::zero());
  try {
    for (std::uint64_t i = 0; budget.duration ? Clock::now() < ends : i < budget.iterations; ++i) {
      const auto took = exchange();
      recorder.add(halve ? took / 2 : took);
    }
  } catch (...) {
    if (recorder.count() > 0) rows.push_back(row());
    throw;
  }
  rows.push_back(row());
}

// NOLINTNEXTLINE(readability-function-cognitive-complexity): 36 today, above the cap of 25; to split
std::uint64_t answer_pings(const AnswerSettings& s) {
  const Lane& lane = s.lane;
  PingPoster poster(lane, s.operation, s.max_inline_data, 1);
  std::array<ibv_wc, poll_batch> wcs{};
  SpinGuard spin(s.stop_fd);
  std::uint32_t size = 0;  // the size announced last
  std::uint8_t seen = 0;   // write: the last tag answered
  std::uint64_t answered = 0;
  std::uint32_t polls_skipped = 0;
  for (;;) {
    if (s.operation == bw::Operation::write && size > 0) {
      const std::uint8_t tag = last_byte(lane.receive_address, size);
      if (tag != seen) {
        seen = tag;
        poster.post_from(lane.local_address, lane.lkey, size, lane.remote_address, lane.rkey, false);
        ++answered;
        continue;
      }
      // Between writes the CQ matters less than the memory: look at it one spin in 64.
      if (++polls_skipped % 64 != 0 && !poster.backlog()) continue;
    }
    const int got = poll_lane(lane, wcs);
    for (int k = 0; k < got; ++k) {
      const auto& wc = wcs[static_cast<std::size_t>(k)];
      if (wc.status == IBV_WC_WR_FLUSH_ERR) return answered;  // the client is gone
      if (wc.status != IBV_WC_SUCCESS) fail_completion(wc);
      poster.reaped(wc);
      if (wc.wr_id != receive_id) continue;
      if ((wc.wc_flags & IBV_WC_WITH_IMM) != 0) {
        size = bw::decode_size_announcement(wc.imm_data, lane.receive_length);
        seen = 0;
        if (s.operation == bw::Operation::write) last_byte(lane.receive_address, size) = 0;
        post_size(lane, size);
      } else {
        // send: answer with as many bytes as arrived (the receive buffer bounds them).
        poster.post_from(lane.local_address, lane.lkey, wc.byte_len, 0, 0, false);
        ++answered;
      }
      post_receives(lane, 1);  // after the answer: it is on the client's clock
    }
    if (got == 0 && spin.due()) {
      if (!s.connected()) return answered;
      spin.check_stop("while answering");
    }
  }
}

}  // namespace rdmakit
