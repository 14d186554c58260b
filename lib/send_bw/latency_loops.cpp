// The latency loops: a client's pings, timed one by one, and the server's answers.

#include "lib/send_bw/loops.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <optional>
#include <span>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/base/wait.hpp"
#include "lib/rdma/verbs.hpp"
#include "lib/rdma/work_request.hpp"
#include "lib/send_bw/datagram_end.hpp"
#include "lib/send_bw/loop_support.hpp"
#include "lib/send_bw/tick_clock.hpp"

namespace rdmakit {

// The loops' shared polling, posting and idle checks (lib/send_bw/loop_support).
using namespace loop;

namespace {

// The latency loops' lane to sleep on: the write test watches memory for the answer, not
// the CQ, so it never sleeps.
std::span<const Lane> ping_sleep_lane(bool events, bw::Operation operation, const Lane& lane) {
  return choose_completion_mode(events, operation == bw::Operation::write) == CompletionMode::events
             ? std::span<const Lane>(&lane, 1)
             : std::span<const Lane>();
}

// The control message of the latency test: a zero-length SEND with the size as immediate,
// or, where the device carries no immediate data (iWARP), an inline SEND of the size message
// (lib/send_bw/bw_messages). `to`: a datagram's destination (-c UD).
void post_size(const Lane& lane, std::uint32_t size, std::uint32_t max_inline_data,
               const DatagramAddress* to = nullptr) {
  ibv_send_wr wr{};
  wr.wr_id = WorkId{.kind = WorkKind::send, .owner = 0, .sequence = 0}.encode();
  wr.send_flags = IBV_SEND_SIGNALED;
  if (lane.immediate_data) {
    wr.opcode = IBV_WR_SEND_WITH_IMM;  // no scatter/gather entry: nothing but the immediate
    wr.imm_data = bw::encode_size_announcement(size);
    if (to != nullptr) address_datagram(*to, wr);
    post(lane.qp, &wr, 0);
    return;
  }
  if (max_inline_data < bw::size_message_bytes) {
    throw Unsupported(
        fmt::format("--lat: the device carries no immediate data and sends {} bytes inline, fewer than "
                    "the {}-byte size message",
                    max_inline_data, bw::size_message_bytes));
  }
  // Inline: copied at the post, so no registered buffer (and no ping) ever holds the marker.
  auto message = bw::encode_size_message(size);
  ibv_sge sge{.addr = reinterpret_cast<std::uintptr_t>(message.data()),
              .length = static_cast<std::uint32_t>(message.size()),
              .lkey = 0};
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags |= IBV_SEND_INLINE;
  post(lane.qp, &wr, sge.length);
}

// The size a received message announces, if it is an announcement (over a connection).
std::optional<std::uint32_t> announced_size(const Lane& lane, const ibv_wc& wc) {
  if (lane.immediate_data) {
    if ((wc.wc_flags & IBV_WC_WITH_IMM) == 0) return std::nullopt;
    return bw::decode_size_announcement(wc.imm_data, lane.receive_length);
  }
  const auto* received = reinterpret_cast<const std::uint8_t*>(lane.receive_address);
  return bw::decode_size_message({received, std::min(wc.byte_len, lane.receive_length)}, lane.receive_length);
}

// -c UD latency: a ping's tag, its immediate (network byte order), which the answer
// carries back. The top bit tells it from a size announcement; the size's place in the
// run and the ping's number tell a late answer from the one awaited.
std::uint32_t ping_tag(std::uint32_t generation, std::uint32_t number) {
  return htonl(0x80000000U | ((generation & 0x7fU) << 24) | (number & 0xffffffU));
}
bool is_ping_tag(std::uint32_t imm_data) {
  return (ntohl(imm_data) & 0x80000000U) != 0;
}

volatile std::uint8_t& last_byte(std::uint64_t address, std::uint32_t size) {
  return *reinterpret_cast<volatile std::uint8_t*>(address + size - 1);
}

// Sends in a latency loop, signalled one in latency_signal_every so the send queue drains.
class PingPoster {
 public:
  // `generation` tells this poster's completions from those of an earlier one on the same
  // queue (the previous size's last signalled send may complete after it has gone).
  PingPoster(const Lane& lane, bw::Operation operation, const AtomicCounters* atomics, std::uint32_t max_inline_data,
             std::uint32_t generation)
      : lane_(lane),
        opcode_(opcode_of(operation, atomics)),
        inline_data_(bw::carries_payload(operation)),
        max_inline_data_(max_inline_data),
        sends_(generation) {}
  // `count`: atomics, what the counter holds before this operation.
  // Returns when it posted (ticks, lib/send_bw/tick_clock): the request is built by then, as
  // perftest's are before it reads the clock.
  std::uint64_t post_from(std::uint64_t address, std::uint32_t lkey, std::uint32_t size, std::uint64_t remote_address,
                          std::uint32_t rkey, bool always_signal, std::uint64_t count = 0) {
    const WorkId id = sends_.next_id();
    const auto operands = is_atomic(opcode_) ? atomic_operands(opcode_, count) : AtomicOperands{0, 0};
    build_send(
        SendRequest{.id = id,
                    .opcode = opcode_,
                    .local = ibv_sge{.addr = address, .length = size, .lkey = lkey},
                    .flags = send_flags(sends_.signalled(always_signal), inline_data_ && size <= max_inline_data_),
                    .remote_address = remote_address,
                    .rkey = rkey,
                    .compare_add = operands.compare_add,
                    .swap = operands.swap},
        wr_, sge_);
    const auto posted = ticks_now();
    post(lane_.qp, &wr_, size);
    return posted;
  }
  // -c UD: a SEND with `imm` to `to`, of `size` bytes from the lane's buffer; returns when
  // it posted, as post_from.
  std::uint64_t post_datagram(std::uint32_t size, std::uint32_t imm, const DatagramAddress& to) {
    build_send(SendRequest{.id = sends_.next_id(),
                           .opcode = IBV_WR_SEND_WITH_IMM,
                           .local = ibv_sge{.addr = lane_.local_address, .length = size, .lkey = lane_.lkey},
                           .flags = send_flags(sends_.signalled(false), size <= max_inline_data_)},
               wr_, sge_);
    wr_.imm_data = imm;
    address_datagram(to, wr_);
    const auto posted = ticks_now();
    post(lane_.qp, &wr_, size);
    return posted;
  }
  // Records a completion of ours; the signalled ones free the send queue up to them.
  void reaped(const ibv_wc& wc) {
    const auto id = WorkId::decode(wc.wr_id);
    if (id.kind != WorkKind::receive) sends_.completed(id);
  }
  bool backlog() const { return sends_.backlog(); }

 private:
  const Lane& lane_;
  ibv_wr_opcode opcode_;
  bool inline_data_;
  std::uint32_t max_inline_data_;
  SendBacklog sends_;
  ibv_sge sge_{};
  ibv_send_wr wr_{};
};

// The client side of ping(): one message in flight, each exchange timed.
class PingClient {
 public:
  // `generation`: this size's place in the run, so the completions of the previous size's
  // poster on the same queue are never taken for this one's.
  PingClient(const PingSettings& s, std::uint32_t size, std::uint32_t generation)
      : s_(s),
        lane_(s.lane),
        size_(size),
        poster_(s.lane, s.operation, s.atomics, s.basics.max_inline_data, generation),
        spin_(s.basics.limits.stop_fd, std::nullopt, ping_sleep_lane(s.basics.events, s.operation, lane_)),
        where_(fmt::format("at {} bytes", size)),
        generation_(generation) {}

  // Announces the size and waits for the server's echo of it.
  void announce_size() {
    if (lane_.peer.ah != nullptr) {
      announce_datagram_size();
      return;
    }
    post_size(lane_, size_, s_.basics.max_inline_data);
    await(
        [&](const ibv_wc& wc) {
          if (!is_receive(wc)) return false;
          const auto echoed = announced_size(lane_, wc);
          if (echoed != size_) {
            throw ProtocolError(fmt::format("the server answered the {}-byte announcement with something else", size_));
          }
          return true;
        },
        "answer to the size announcement");
    if (s_.operation == bw::Operation::write) last_byte(lane_.receive_address, size_) = 0;
  }

  // One exchange; returns its duration in ticks (lib/send_bw/tick_clock), none for a datagram
  // ping that went unanswered.
  std::optional<std::uint64_t> exchange() {
    switch (s_.operation) {
      case bw::Operation::send: {
        if (lane_.peer.ah != nullptr) return exchange_datagram();
        const auto started = poster_.post_from(lane_.local_address, lane_.lkey, size_, 0, 0, false);
        return *await(is_receive, "answer") - started;
      }
      case bw::Operation::read: {
        const auto started =
            poster_.post_from(lane_.local_address, lane_.lkey, size_, lane_.remote_address, lane_.rkey, true);
        return *await([](const ibv_wc& wc) { return !is_receive(wc) && wc.opcode == IBV_WC_RDMA_READ; },
                      "read completion") -
               started;
      }
      case bw::Operation::write: return exchange_write();
      case bw::Operation::atomic: return exchange_atomic();
    }
    return 0;
  }

  std::uint64_t pings_sent() const { return pings_sent_; }
  std::uint64_t unanswered() const { return unanswered_; }

 private:
  // -c UD: the announcement again every ping_loss_timeout until its echo comes (a datagram
  // may be lost); a late echo of an earlier announcement, or answer, is passed over.
  void announce_datagram_size() {
    SilenceBound silence(s_.basics.limits.timeout);
    for (;;) {
      post_size(lane_, size_, s_.basics.max_inline_data, &lane_.peer);
      const auto echoed = [&](const ibv_wc& wc) {
        return is_receive(wc) && (wc.wc_flags & IBV_WC_WITH_IMM) != 0 && !is_ping_tag(wc.imm_data) &&
               ntohl(wc.imm_data) == size_;
      };
      if (await(echoed, "answer to the size announcement", ping_loss_timeout)) return;
      silence.check(Clock::now(), [&] {
        return fmt::format("no answer to the {}-byte announcement for {} ms", size_, silence.limit_ms());
      });
    }
  }

  // -c UD: one tagged ping and its answer, if the answer comes within ping_loss_timeout.
  std::optional<std::uint64_t> exchange_datagram() {
    const auto tag = ping_tag(generation_, static_cast<std::uint32_t>(pings_sent_));
    const auto started = poster_.post_datagram(size_, tag, lane_.peer);
    ++pings_sent_;
    const auto answered = [tag](const ibv_wc& wc) {
      return is_receive(wc) && (wc.wc_flags & IBV_WC_WITH_IMM) != 0 && wc.imm_data == tag;
    };
    const auto seen = await(answered, "answer", ping_loss_timeout);
    if (!seen) {
      ++unanswered_;
      return std::nullopt;
    }
    return *seen - started;
  }

  // Polls until `done` says the awaited completion arrived and returns when it was seen
  // (ticks); reposting receives and bookkeeping come after that instant. Bounded by the
  // timeout, counted from the first idle check after the last arrival: the clock is read
  // only there, off the measured path.
  // `give_up_after`: none when nothing came that long (at the idle checks' resolution).
  template <class Done>
  std::optional<std::uint64_t> await(Done done, const char* awaiting,
                                     std::optional<std::chrono::milliseconds> give_up_after = std::nullopt) {
    std::optional<SilenceBound> loss;  // give_up_after, from the first idle check
    for (;;) {
      const int got = poll_lane(lane_, wcs_);
      if (got > 0) {
        bool arrived = false;  // the whole batch is handled: a later completion may be a receive to repost
        for (int k = 0; k < got; ++k) {
          const auto& wc = wcs_[static_cast<std::size_t>(k)];
          if (wc.status != IBV_WC_SUCCESS) fail_completion(wc);
          arrived = done(wc) || arrived;
        }
        const auto seen = ticks_now();
        settle(got);
        if (arrived) {
          silence_.note_progress();
          return seen;
        }
      } else if (spin_.due() && gives_up(loss, give_up_after, awaiting)) {
        return std::nullopt;
      }
    }
  }

  // await()'s idle check: true once `give_up_after` has passed since the first one; throws
  // on the run's timeout and on the stop signal.
  bool gives_up(std::optional<SilenceBound>& loss, std::optional<std::chrono::milliseconds> give_up_after,
                const char* awaiting) {
    const auto now = Clock::now();
    if (!loss) loss.emplace(give_up_after, now);
    if (loss->passed(now)) return true;
    silence_.check(now,
                   [&] { return fmt::format("no {} for {} ms at {} bytes", awaiting, silence_.limit_ms(), size_); });
    spin_.check_stop(where_);
    return false;
  }

  // Books the `got` completions just polled and reposts the receives they used.
  void settle(int got) {
    std::uint32_t receives = 0;
    for (int k = 0; k < got; ++k) {
      const auto& wc = wcs_[static_cast<std::size_t>(k)];
      poster_.reaped(wc);
      if (is_receive(wc)) ++receives;
    }
    if (receives > 0) post_receives(lane_, receives);
  }

  // One look at the CQ without waiting: an error completion throws, the rest are reaped.
  // The write test does this while it watches its buffer for the answer, so a write the
  // server refused (an rkey or address in its answer that is not its buffer) ends the
  // run with that error instead of a timeout.
  void reap() {
    const int got = poll_lane(lane_, wcs_);
    for (int k = 0; k < got; ++k) {
      const auto& wc = wcs_[static_cast<std::size_t>(k)];
      if (wc.status != IBV_WC_SUCCESS) fail_completion(wc);
    }
    settle(got);
  }

  std::uint64_t exchange_write() {
    tag_ = static_cast<std::uint8_t>(tag_ % 255 + 1);  // 1..255: never the 0 both sides start from
    last_byte(lane_.local_address, size_) = tag_;
    const auto started =
        poster_.post_from(lane_.local_address, lane_.lkey, size_, lane_.remote_address, lane_.rkey, false);
    const auto& answer = last_byte(lane_.receive_address, size_);
    watch_.reset();
    while (answer != tag_) {
      if (spin_.due()) watch_write();
    }
    const auto took = ticks_now() - started;
    // Untimed: reap our signalled writes (and see their errors) before the queue fills.
    while (poster_.backlog()) await([](const ibv_wc& wc) { return !is_receive(wc); }, "write completion");
    return took;
  }

  // One atomic on the counter; what it fetched must be what the counter held.
  std::uint64_t exchange_atomic() {
    auto& count = s_.atomics->done.front();
    const auto started = poster_.post_from(lane_.local_address, lane_.lkey, bw::atomic_size, lane_.remote_address,
                                           lane_.rkey, true, count);
    const auto took =
        *await([](const ibv_wc& wc) { return wc.opcode == IBV_WC_FETCH_ADD || wc.opcode == IBV_WC_COMP_SWAP; },
               "atomic completion") -
        started;
    const auto fetched = *reinterpret_cast<const volatile std::uint64_t*>(lane_.local_address);
    if (!matches_counter(fetched, count, s_.atomics->order)) {
      throw ProtocolError(fmt::format("{} fetched {} ({:#018x}) from the server's counter, which should hold {}{}",
                                      to_string(s_.atomics->kind), fetched, fetched, count,
                                      s_.atomics->order == AtomicByteOrder::swapped ? ", byte-swapped as before" : ""));
    }
    ++count;
    return took;
  }

  void watch_write() {
    reap();
    const auto now = Clock::now();
    if (!watch_) watch_.emplace(s_.basics.limits.timeout, now);
    watch_->check(now,
                  [&] { return fmt::format("no answering write for {} ms at {} bytes", watch_->limit_ms(), size_); });
    spin_.check_stop(where_);
  }

  const PingSettings& s_;
  const Lane& lane_;
  std::uint32_t size_;
  PingPoster poster_;
  SpinGuard spin_;
  std::string where_;
  std::array<ibv_wc, poll_batch> wcs_{};
  SilenceBound silence_{s_.basics.limits.timeout};  // arrivals (noted, dated at the idle checks)
  std::optional<SilenceBound> watch_;               // write: from the first idle check of this exchange
  std::uint8_t tag_ = 0;                            // write: the last byte of the latest message
  std::uint32_t generation_;
  std::uint64_t pings_sent_ = 0;  // -c UD
  std::uint64_t unanswered_ = 0;
};

// The server side of ping(): answers each message as it arrives.
class PingAnswerer {
 public:
  explicit PingAnswerer(const AnswerSettings& s)
      : s_(s),
        lane_(s.lane),
        // One poster for the whole run; it posts only answers: a SEND, or a WRITE for write.
        poster_(s.lane, s.operation == bw::Operation::write ? bw::Operation::write : bw::Operation::send, nullptr,
                s.basics.max_inline_data, 1),
        spin_(s.basics.limits.stop_fd, s.peer.silence, ping_sleep_lane(s.basics.events, s.operation, lane_), 0,
              s.peer.cm_fds) {
    spin_.alive_while(s.peer.still_working, s.peer.still_working_sign);
  }

  // Answers until the client disconnects; returns how many messages it answered.
  std::uint64_t run() {
    for (;;) {
      if (s_.operation == bw::Operation::write && size_ > 0) {
        if (answer_write()) {
          spin_.saw_progress();
          continue;
        }
        // Between writes the CQ matters less than the memory: look at it one spin in 64.
        if (++polls_skipped_ % 64 != 0 && !poster_.backlog()) continue;
      }
      const int got = poll_lane(lane_, wcs_);
      if (got > 0) spin_.saw_progress();
      for (int k = 0; k < got; ++k) {
        if (!handle(wcs_[static_cast<std::size_t>(k)])) return answered_;  // the client is gone
      }
      if (got == 0 && spin_.due()) {
        if (!s_.peer.connected()) return answered_;
        spin_.check_stop("while answering");
      }
    }
  }

 private:
  // write: answers the client's latest write, if one came since the last look.
  bool answer_write() {
    const std::uint8_t tag = last_byte(lane_.receive_address, size_);
    if (tag == seen_) return false;
    seen_ = tag;
    poster_.post_from(lane_.local_address, lane_.lkey, size_, lane_.remote_address, lane_.rkey, false);
    ++answered_;
    return true;
  }

  // -c UD: one datagram. Announcements are echoed, pings answered with their tag, both to
  // the sender of the first datagram; false for the client's end-of-stream message.
  bool handle_datagram(const ibv_wc& wc) {
    if (!client_) client_ = reply_address(lane_, s_.reply_from, wc, loop::received_grh(lane_), client_handle_);
    const bool tagged = (wc.wc_flags & IBV_WC_WITH_IMM) != 0;
    if (tagged && !loop::is_datagram_counts(wc) && !is_ping_tag(wc.imm_data)) {
      size_ = bw::decode_size_announcement(wc.imm_data, lane_.receive_length - grh_bytes);
      post_size(lane_, size_, s_.basics.max_inline_data, &*client_);
    } else if (const auto size = take_datagram(lane_, wc, *s_.datagram)) {
      poster_.post_datagram(*size, tagged ? wc.imm_data : 0, *client_);
      ++answered_;
    } else {
      post_receives(lane_, 1);  // for the client's later counts and done
      return false;
    }
    post_receives(lane_, 1);
    return true;
  }

  // One completion; false when it says the client is gone.
  bool handle(const ibv_wc& wc) {
    if (wc.status == IBV_WC_WR_FLUSH_ERR) return false;
    if (wc.status != IBV_WC_SUCCESS) fail_completion(wc);
    poster_.reaped(wc);
    if (!is_receive(wc)) return true;
    if (s_.datagram != nullptr) return handle_datagram(wc);
    if (const auto announced = announced_size(lane_, wc)) {
      size_ = *announced;
      seen_ = 0;
      if (s_.operation == bw::Operation::write) last_byte(lane_.receive_address, size_) = 0;
      post_size(lane_, size_, s_.basics.max_inline_data);
    } else {
      // send: answer with as many bytes as arrived (the receive buffer bounds them).
      poster_.post_from(lane_.local_address, lane_.lkey, wc.byte_len, 0, 0, false);
      ++answered_;
    }
    post_receives(lane_, 1);  // after the answer: it is on the client's clock
    return true;
  }

  const AnswerSettings& s_;
  const Lane& lane_;
  PingPoster poster_;
  SpinGuard spin_;
  std::array<ibv_wc, poll_batch> wcs_{};
  std::uint32_t size_ = 0;  // the size announced last
  std::uint8_t seen_ = 0;   // write: the last tag answered
  std::uint64_t answered_ = 0;
  std::uint32_t polls_skipped_ = 0;
  std::unique_ptr<AddressHandle> client_handle_;  // -c UD: the way back to the client
  std::optional<DatagramAddress> client_;
};

}  // namespace

void ping(const PingSettings& s, std::uint32_t size, const Budget& budget, std::uint64_t warmup,
          std::vector<LatencyRow>& rows) {
  // Each size appends one row, so the count of rows numbers the sizes of a sweep.
  PingClient client(s, size, static_cast<std::uint32_t>(rows.size() + 1));
  TickCalibration calibration;  // over the announcement and the warm-up, 10 ms at least
  if (s.announces_size) client.announce_size();
  for (std::uint64_t i = 0; i < warmup; ++i) client.exchange();
  calibration.finish(std::chrono::milliseconds(10));
  const auto unanswered_in_warmup = client.unanswered();
  LatencyRecorder recorder;
  auto row = [&] {
    if (s.datagrams_sent != nullptr) s.datagrams_sent->push_back({.size = size, .count = client.pings_sent()});
    return LatencyRow{.size = size,
                      .summary = recorder.summary().value_or(LatencySummary{}),
                      .histogram = s.histogram ? recorder.histogram() : std::vector<HistogramBucket>{},
                      .unanswered = client.unanswered() - unanswered_in_warmup};
  };
  // perftest's conventions: a READ's or an atomic's sample is the whole operation.
  const bool halve = s.operation == bw::Operation::send || s.operation == bw::Operation::write;
  // Beyond a million samples the recorder grows (rarely, doubling) rather than reserve gigabytes.
  recorder.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(budget.iterations, std::uint64_t{1} << 20)));
  const auto ends = ticks_now() + calibration.ticks(budget.duration.value_or(std::chrono::nanoseconds::zero()));
  try {
    for (std::uint64_t i = 0; budget.duration ? ticks_now() < ends : i < budget.iterations; ++i) {
      if (const auto took = client.exchange()) recorder.add(calibration.duration(halve ? *took / 2 : *took));
    }
  } catch (...) {
    if (recorder.count() > 0) rows.push_back(row());
    throw;
  }
  rows.push_back(row());
}

std::uint64_t answer_pings(const AnswerSettings& s) {
  return PingAnswerer(s).run();
}

namespace {

// lockstep_writes' two halves: this side's writes, and the watch for the peer's.
class LockstepWriter {
 public:
  LockstepWriter(const LockstepSettings& s, std::uint32_t size, std::uint64_t iterations)
      : s_(s),
        size_(size),
        iterations_(iterations),
        poster_(s.lane, bw::Operation::write, nullptr, s.basics.max_inline_data, 1),
        spin_(s.basics.limits.stop_fd, std::nullopt, {}),
        where_(fmt::format("at {} bytes", size)),
        landed_(last_byte(s.lane.receive_address, size)) {}

  // Until the peer's write `number` has landed (its last byte `number` mod 256), each wait
  // bounded by the timeout from its first idle check.
  void await_peer(std::uint64_t number) {
    const auto tag = static_cast<std::uint8_t>(number);
    std::optional<SilenceBound> watch;
    while (landed_ != tag) {
      if (!spin_.due()) continue;
      reap();
      const auto now = Clock::now();
      if (!watch) watch.emplace(s_.basics.limits.timeout, now);
      watch->check(now, [&] {
        return fmt::format("the peer's write {} of {} did not land for {} ms {}", number, iterations_,
                           watch->limit_ms(), where_);
      });
      spin_.check_stop(where_);
    }
  }

  // This side's write `number`, signalled; returns when it was posted (ticks).
  std::uint64_t write(std::uint64_t number) {
    last_byte(s_.lane.local_address, size_) = static_cast<std::uint8_t>(number);
    const auto posted =
        poster_.post_from(s_.lane.local_address, s_.lane.lkey, size_, s_.lane.remote_address, s_.lane.rkey, true);
    while (poster_.backlog()) reap();
    return posted;
  }

 private:
  void reap() {
    const int got = poll_lane(s_.lane, wcs_);
    for (int k = 0; k < got; ++k) {
      const auto& wc = wcs_[static_cast<std::size_t>(k)];
      if (wc.status != IBV_WC_SUCCESS) fail_completion(wc);
      poster_.reaped(wc);
    }
  }

  const LockstepSettings& s_;
  std::uint32_t size_;
  std::uint64_t iterations_;
  PingPoster poster_;
  SpinGuard spin_;
  std::string where_;
  std::array<ibv_wc, poll_batch> wcs_{};
  const volatile std::uint8_t& landed_;
};

}  // namespace

void lockstep_writes(const LockstepSettings& s, std::uint32_t size, std::uint64_t iterations,
                     std::vector<LatencyRow>& rows) {
  LockstepWriter writer(s, size, iterations);
  TickCalibration calibration;
  calibration.finish(std::chrono::milliseconds(10));
  LatencyRecorder recorder;
  recorder.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(iterations, std::uint64_t{1} << 20)));
  const auto row = [&] {
    return LatencyRow{.size = size,
                      .summary = recorder.summary().value_or(LatencySummary{}),
                      .histogram = s.histogram ? recorder.histogram() : std::vector<HistogramBucket>{},
                      .unanswered = 0};
  };
  std::optional<std::uint64_t> previous;
  try {
    for (std::uint64_t k = 1; k <= iterations; ++k) {
      // The leader's k-th answers the peer's (k-1)-th; the other side's, the leader's k-th.
      const auto awaited = s.leader ? k - 1 : k;
      if (awaited > 0) writer.await_peer(awaited);
      const auto posted = writer.write(k);
      if (previous) recorder.add(calibration.duration((posted - *previous) / 2));
      previous = posted;
    }
    if (s.leader) writer.await_peer(iterations);
  } catch (...) {
    if (recorder.count() > 0) rows.push_back(row());
    throw;
  }
  rows.push_back(row());
}

}  // namespace rdmakit
