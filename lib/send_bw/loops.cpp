#include "lib/send_bw/loops.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/base/wait.hpp"
#include "lib/rdma/verbs.hpp"
#include "lib/rdma/work_request.hpp"
#include "lib/send_bw/datagram_end.hpp"
#include "lib/send_bw/loop_support.hpp"
#include "lib/send_bw/tick_clock.hpp"

namespace rdmakit {

using loop::fail_completion;
using loop::is_receive;
using loop::poll_batch;
using loop::poll_lane;
using loop::post;
using loop::receive_work;
using loop::SpinGuard;

namespace {

constexpr std::uint32_t post_batch = 32;
// The allowance of a sender that is not paced.
constexpr std::uint64_t unpaced = std::numeric_limits<std::uint64_t>::max();
// -e in the bandwidth loops: empty polls before an idle loop sleeps. The next completion of
// a stream is often that close, and each sleep costs a wake-up: in the rxe VM a receiver
// that slept at once lost a fifth of the 4 KiB bandwidth (perftest's -e a third); with 256
// it kept 0.95 of it at a fifth of the CPU time. The latency loops sleep at once: their -e
// measures the wake-up.
constexpr std::uint32_t stream_spins_before_sleep = 256;

// The owner of a server's credit messages in their work ids: their completions count for no
// reflection.
constexpr std::uint32_t credit_owner = 1;
// The owner of a client's heartbeats (Heartbeat): their completions count for no message.
constexpr std::uint32_t heartbeat_owner = 2;

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

// What an atomic on a counter that holds `count` adds or compares, and what it swaps in.
struct AtomicOperands {
  std::uint64_t compare_add;
  std::uint64_t swap;
};
AtomicOperands atomic_operands(ibv_wr_opcode opcode, std::uint64_t count) {
  if (opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) return {.compare_add = 1, .swap = 0};
  return {.compare_add = count, .swap = count + 1};
}

// The lanes an idle loop sleeps on: none unless completion events were asked for.
std::span<const Lane> sleep_lanes(bool events, const std::vector<Lane>& lanes) {
  return choose_completion_mode(events) == CompletionMode::events ? std::span<const Lane>(lanes)
                                                                  : std::span<const Lane>();
}

// The latency loops' lane to sleep on: the write test watches memory for the answer, not
// the CQ, so it never sleeps.
std::span<const Lane> ping_sleep_lane(bool events, bw::Operation operation, const Lane& lane) {
  return choose_completion_mode(events, operation == bw::Operation::write) == CompletionMode::events
             ? std::span<const Lane>(&lane, 1)
             : std::span<const Lane>();
}

}  // namespace

void Heartbeat::beat_if_due(const Lane& lane, Clock::time_point now) {
  if (in_flight_ || now < next_) return;
  ibv_sge sge{};
  ibv_send_wr wr{};
  build_send(SendRequest{.id = WorkId{.kind = WorkKind::send, .owner = heartbeat_owner, .sequence = 0},
                         .opcode = IBV_WR_SEND,
                         .local = ibv_sge{.addr = lane.local_address, .length = 0, .lkey = lane.lkey},
                         .flags = IBV_SEND_SIGNALED},
             wr, sge);
  wr.num_sge = 0;  // zero-length: some providers refuse an empty scatter/gather entry
  post(lane.qp, &wr, 0);
  in_flight_ = true;
  next_ = now + period_;
}

bool Heartbeat::completed(const WorkId& id) {
  if (id.kind != WorkKind::send || id.owner != heartbeat_owner) return false;
  in_flight_ = false;
  return true;
}

void post_receives(const Lane& lane, std::uint32_t count) {
  ibv_sge sge{};
  ibv_recv_wr wr{};
  build_receive(receive_work,
                ibv_sge{.addr = lane.receive_address, .length = lane.receive_length, .lkey = lane.receive_lkey}, wr,
                sge);
  for (std::uint32_t i = 0; i < count; ++i) {
    ibv_recv_wr* bad = nullptr;
    check_returned(ibv_post_recv(lane.qp, &wr, &bad), "ibv_post_recv", "");
  }
}

namespace {

// Builds the sender's post lists: up to post_batch requests chained into one ibv_post_send.
class StreamPoster {
 public:
  StreamPoster(const StreamSettings& s, std::uint32_t size)
      : size_(size),
        opcode_(opcode_of(s.operation, s.atomics)),
        kind_(work_kind_of(opcode_)),
        inline_data_(bw::carries_payload(s.operation) && size <= s.basics.max_inline_data),
        atomics_(s.atomics) {}

  // Posts what `lane` may post now, at most `allowance`, in post lists of at most
  // post_batch; returns how many it posted.
  std::uint64_t fill(const Lane& lane, std::size_t l, StreamLedger& ledger, std::uint32_t depth,
                     std::uint64_t allowance) {
    std::uint64_t done = 0;
    while (const std::uint32_t n = ledger.postable(
               l, static_cast<std::uint32_t>(std::min<std::uint64_t>(post_batch, allowance - done)), depth)) {
      for (std::uint32_t i = 0; i < n; ++i) {
        const std::uint64_t number = ledger.next_number(l, i);
        // Atomics: the counter holds this lane's earlier operations, and this run's before this one.
        const auto operands = atomics_ != nullptr ? atomic_operands(opcode_, atomics_->done[l] + number - 1)
                                                  : AtomicOperands{.compare_add = 0, .swap = 0};
        build_send(SendRequest{.id = WorkId{.kind = kind_, .owner = 0, .sequence = static_cast<std::uint32_t>(number)},
                               .opcode = opcode_,
                               .local = ibv_sge{.addr = lane.local_address, .length = size_, .lkey = lane.lkey},
                               .flags = send_flags(ledger.signalled(l, number), inline_data_),
                               .remote_address = lane.remote_address,
                               .rkey = lane.rkey,
                               .compare_add = operands.compare_add,
                               .swap = operands.swap},
                   wrs_[i], sges_[i]);
        if (lane.peer.ah != nullptr) address_datagram(lane.peer, wrs_[i]);
        wrs_[i].next = i + 1 < n ? &wrs_[i + 1] : nullptr;
      }
      post(lane.qp, wrs_.data(), size_);
      ledger.posted(l, n);
      done += n;
    }
    return done;
  }

 private:
  std::uint32_t size_;
  ibv_wr_opcode opcode_;
  WorkKind kind_;
  bool inline_data_;
  const AtomicCounters* atomics_;
  std::array<ibv_sge, post_batch> sges_{};
  std::array<ibv_send_wr, post_batch> wrs_{};
};

// Reaps `lane`'s completions into the ledger and reposts the receives they used; false when
// its CQ was empty. With `credits`, what arrives is the server's credit messages, not
// messages sent back: the newest total in the receive buffer (all share it) is granted.
bool reap_stream(const Lane& lane, std::size_t l, StreamLedger& ledger, std::array<ibv_wc, poll_batch>& wcs,
                 SendCredits* credits, Heartbeat* heartbeat) {
  const int got = poll_lane(lane, wcs);
  if (got == 0) return false;
  std::uint32_t receives = 0;
  for (int k = 0; k < got; ++k) {
    const auto& wc = wcs[static_cast<std::size_t>(k)];
    if (wc.status != IBV_WC_SUCCESS) fail_completion(wc);
    const auto id = WorkId::decode(wc.wr_id);
    if (id.kind == WorkKind::receive) {
      ++receives;
    } else if (heartbeat == nullptr || !heartbeat->completed(id)) {
      ledger.completed_through(l, id.sequence);
    }
  }
  if (receives > 0 && credits != nullptr) {
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(lane.receive_address);
    const auto total = bw::decode_credit_message({bytes, bw::credit_message_bytes});
    if (!total) throw ProtocolError("the server sent something other than a credit message during a SEND stream");
    credits->grant(*total);
  } else if (receives > 0) {
    ledger.received(l, receives);
  }
  if (receives > 0) post_receives(lane, receives);
  return true;
}

// A stream that finished: every request posted has completed, so each lane's atomic counter
// moved that far.
void count_atomics(const StreamSettings& s, const StreamLedger& ledger) {
  if (s.atomics == nullptr) return;
  for (std::size_t l = 0; l < s.lanes.size(); ++l) s.atomics->done[l] += ledger.posted_on(l);
}

// What went out on each lane, however the stream ended: -c UD's counts (after a Ctrl-C too).
void count_sends(const StreamSettings& s, const StreamLedger& ledger) {
  if (s.lane_sends == nullptr) return;
  for (std::size_t l = 0; l < s.lanes.size(); ++l) (*s.lane_sends)[l] += ledger.posted_on(l);
}

// --interval: the running total into its intervals; one that closes is shown as it ends.
void record_interval(const StreamSettings& s, std::optional<IntervalRecorder>& intervals, std::uint64_t total,
                     Clock::time_point now, std::uint32_t size) {
  if (!intervals) return;
  const auto closed = intervals->samples().size();
  intervals->record(total, now);
  if (s.interval_done && intervals->samples().size() > closed) s.interval_done(intervals->samples().back(), size);
}

// One pass over the lanes: each posts what its depth, the pacer's `allowance` and (iWARP) its
// credits let it, then reaps; true when a completion came.
bool stream_pass(const StreamSettings& s, StreamPoster& poster, StreamLedger& ledger,
                 std::array<ibv_wc, poll_batch>& wcs, std::uint64_t allowance) {
  bool progress = false;
  for (std::size_t l = 0; l < s.lanes.size(); ++l) {
    SendCredits* credits = s.credits != nullptr ? &(*s.credits)[l] : nullptr;
    const auto sent =
        poster.fill(s.lanes[l], l, ledger, s.depth, credits ? std::min(allowance, credits->allowed()) : allowance);
    allowance -= sent;
    if (credits != nullptr) credits->sent += sent;
    progress = reap_stream(s.lanes[l], l, ledger, wcs, credits, s.heartbeat) || progress;
  }
  return progress;
}

}  // namespace

void stream(const StreamSettings& s, std::uint32_t size, const Budget& budget, std::vector<BandwidthRow>& rows) {
  StreamPoster poster(s, size);
  StreamLedger ledger(s.lanes.size(), budget, SignalSchedule::for_message_size(size, s.signal_every), s.bidirectional,
                      Clock::now());
  std::array<ibv_wc, poll_batch> wcs{};
  SpinGuard spin(s.basics.limits.stop_fd, std::nullopt, sleep_lanes(s.basics.events, s.lanes),
                 stream_spins_before_sleep);
  SilenceBound silence(s.basics.limits.timeout);
  std::optional<IntervalRecorder> intervals;
  if (s.interval && s.intervals != nullptr) intervals.emplace(*s.interval, Clock::now());
  std::optional<RatePacer> pacer;
  if (s.messages_per_s) pacer.emplace(*s.messages_per_s, Clock::now());
  // What the intervals hold once the run ends, however it ends.
  const auto keep_intervals = [&] {
    if (!intervals) return;
    intervals->finish(ledger.total(), Clock::now());
    s.intervals->insert(s.intervals->end(), intervals->samples().begin(), intervals->samples().end());
  };
  try {
    while (!ledger.finished()) {
      // Paced: no more requests than the rate allows by now, all lanes together.
      const auto allowance = pacer ? pacer->allowance(ledger.posted(), Clock::now()) : unpaced;
      const bool progress = stream_pass(s, poster, ledger, wcs, allowance);
      if (progress) {
        const auto now = Clock::now();
        if (s.heartbeat != nullptr) s.heartbeat->beat_if_due(s.lanes.front(), now);
        ledger.progressed(now);
        silence.progressed(now);
        record_interval(s, intervals, ledger.total(), now, size);
        spin.check_stop_while_busy([size] { return fmt::format("at {} bytes", size); });
      } else if (spin.due()) {
        const auto now = Clock::now();
        if (s.heartbeat != nullptr) s.heartbeat->beat_if_due(s.lanes.front(), now);
        ledger.close_if_due(now);
        silence.check(now, [&] {
          return fmt::format("no completion for {} ms at {} bytes ({} messages done)", silence.limit_ms(), size,
                             ledger.completed());
        });
        spin.check_stop(fmt::format("at {} bytes", size));
      }
    }
  } catch (...) {
    keep_intervals();
    if (ledger.total() > 0) rows.push_back(ledger.row(size));
    count_sends(s, ledger);  // the atomic counters are not checked after a stop
    throw;
  }
  keep_intervals();
  count_atomics(s, ledger);
  count_sends(s, ledger);
  rows.push_back(ledger.row(size));
}

namespace {

// A datagram that arrived on `lane`: its size, counted in the tally; none for the client's
// end-of-stream message, which the tally keeps (with what the reply needs) instead.
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

// Reaps `lane`'s completions into the ledger (arrivals timed at `now`, after the poll) and
// reposts the receives they used. A flushed completion closes the lane: the peer is gone.
bool reap_sink(const Lane& lane, std::size_t l, SinkLedger& ledger, std::array<ibv_wc, poll_batch>& wcs,
               DatagramTally* tally, bool one_sided, std::uint32_t& receives) {
  const int got = poll_lane(lane, wcs);
  const auto now = Clock::now();
  receives = 0;
  for (int k = 0; k < got; ++k) {
    const auto& wc = wcs[static_cast<std::size_t>(k)];
    if (wc.status == IBV_WC_WR_FLUSH_ERR) {
      ledger.close(l);
      return false;
    }
    if (wc.status != IBV_WC_SUCCESS) fail_completion(wc);
    const auto id = WorkId::decode(wc.wr_id);
    if (id.kind == WorkKind::receive) {
      ++receives;
      if (one_sided) {
        continue;  // a heartbeat: progress, no message
      }
      if (tally == nullptr) {
        ledger.arrived(l, wc.byte_len, now);
      } else if (const auto size = take_datagram(lane, wc, *tally)) {
        ledger.arrived(l, *size, now);
      } else {
        ledger.close(l);  // the client's stream ended
      }
    } else if (id.owner != credit_owner) {
      ledger.completed_through(l, id.sequence);
    }
  }
  if (receives > 0) post_receives(lane, receives);
  return got > 0;
}

// The server's side of the credits: after every credit_batch receives reposted on a lane, the
// total so far, inline (the buffer it would come from is where the client's SENDs land).
class CreditGrants {
 public:
  explicit CreditGrants(std::size_t lanes) : reposted_(lanes, 0), told_(lanes, 0) {}

  void reposted(const Lane& lane, std::size_t l, std::uint32_t count) {
    reposted_[l] += count;
    if (reposted_[l] - told_[l] < bw::credit_batch) return;
    const auto message = bw::encode_credit_message(static_cast<std::uint32_t>(reposted_[l]));
    ibv_sge sge{};
    ibv_send_wr wr{};
    build_send(SendRequest{.id = WorkId{.kind = WorkKind::send,
                                        .owner = credit_owner,
                                        .sequence = static_cast<std::uint32_t>(reposted_[l])},
                           .opcode = IBV_WR_SEND,
                           .local = ibv_sge{.addr = reinterpret_cast<std::uintptr_t>(message.data()),
                                            .length = static_cast<std::uint32_t>(message.size()),
                                            .lkey = 0},
                           .flags = send_flags(true, true)},
               wr, sge);
    post(lane.qp, &wr, static_cast<std::uint32_t>(message.size()));
    told_[l] = reposted_[l];
  }

 private:
  std::vector<std::uint64_t> reposted_;
  std::vector<std::uint64_t> told_;
};

// Sends back what `lane` owes, as far as the send queue allows.
void reflect(const Lane& lane, std::size_t l, SinkLedger& ledger, const SinkSettings& s, ibv_send_wr& wr,
             ibv_sge& sge) {
  while (ledger.owes(l, s.depth)) {
    const auto reflection = ledger.next_reflection(l);
    build_send(
        SendRequest{
            .id = WorkId{.kind = WorkKind::send, .owner = 0, .sequence = static_cast<std::uint32_t>(reflection.number)},
            .opcode = IBV_WR_SEND,
            .local = ibv_sge{.addr = lane.local_address, .length = reflection.size, .lkey = lane.lkey},
            .flags = send_flags(reflection.signalled, reflection.size <= s.basics.max_inline_data)},
        wr, sge);
    post(lane.qp, &wr, reflection.size);
  }
}

// One pass over the lanes still open: reap (reposting), grant the credits that reposting
// earned, reflect what is owed; true when a completion came.
bool sink_pass(const SinkSettings& s, SinkLedger& ledger, std::array<ibv_wc, poll_batch>& wcs,
               std::optional<CreditGrants>& grants, ibv_send_wr& wr, ibv_sge& sge) {
  bool progress = false;
  for (std::size_t l = 0; l < s.lanes.size(); ++l) {
    if (ledger.closed(l)) continue;
    DatagramTally* tally = s.datagrams != nullptr ? &(*s.datagrams)[l] : nullptr;
    std::uint32_t receives = 0;
    progress = reap_sink(s.lanes[l], l, ledger, wcs, tally, s.one_sided, receives) || progress;
    if (ledger.closed(l)) continue;
    if (grants && receives > 0) grants->reposted(s.lanes[l], l, receives);
    reflect(s.lanes[l], l, ledger, s, wr, sge);
  }
  return progress;
}

}  // namespace

void sink(const SinkSettings& s, std::vector<BandwidthRow>& rows) {
  SinkLedger ledger(s.lanes.size(), s.reflect, SignalSchedule(signal_interval(s.depth)));
  std::array<ibv_wc, poll_batch> wcs{};
  ibv_sge sge{};
  ibv_send_wr wr{};
  SpinGuard spin(s.basics.limits.stop_fd, s.peer.silence, sleep_lanes(s.basics.events, s.lanes),
                 stream_spins_before_sleep, s.peer.cm_fds);
  spin.alive_while(s.peer.still_working, s.peer.still_working_sign);
  std::optional<Clock::time_point> drain_until;  // set once the peer has gone
  std::optional<CreditGrants> grants;
  if (s.credits) grants.emplace(s.lanes.size());
  bool heard_heartbeat = false;
  try {
    while (!ledger.all_closed()) {
      if (sink_pass(s, ledger, wcs, grants, wr, sge)) {
        // A one-sided test's server sends nothing, so what completed is a heartbeat: from
        // the first on, they say the client lives and their silence that it does not.
        if (s.one_sided && !heard_heartbeat) {
          heard_heartbeat = true;
          spin.alive_while({}, {});
        }
        spin.saw_progress();
        spin.check_stop_while_busy([] { return std::string("while receiving"); });
        continue;
      }
      if (ledger.all_closed() || !spin.due()) continue;
      // The peer's DISCONNECTED can overtake the completions of what it sent just before
      // (a server counted 292 of 300 beside a busy guest): go on polling until the flushed
      // receives close every lane, for a second at most.
      if (!drain_until && !s.peer.connected()) {
        drain_until = Clock::now() + std::chrono::seconds(1);
        spin.peer_gone(*drain_until);
      }
      if (drain_until && Clock::now() >= *drain_until) break;
      spin.check_stop("while receiving");
    }
  } catch (...) {
    ledger.close_runs(rows);
    throw;
  }
  ledger.close_runs(rows);
}

namespace {

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
  client.announce_size();
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

std::string to_string(AtomicKind kind) {
  return kind == AtomicKind::fetch_add ? "fetch-add" : "compare-swap";
}

std::string to_string(AtomicByteOrder order) {
  switch (order) {
    case AtomicByteOrder::host: return "host";
    case AtomicByteOrder::swapped: return "swapped";
    case AtomicByteOrder::unknown: break;
  }
  return "unknown";
}

bool matches_counter(std::uint64_t seen, std::uint64_t expected, AtomicByteOrder& order) {
  const auto swapped = __builtin_bswap64(expected);
  if (swapped == expected) return seen == expected;
  const auto found = seen == expected  ? AtomicByteOrder::host
                     : seen == swapped ? AtomicByteOrder::swapped
                                       : AtomicByteOrder::unknown;
  if (found == AtomicByteOrder::unknown) return false;
  if (order == AtomicByteOrder::unknown) order = found;
  return found == order;
}

void check_atomic_counters(const std::vector<Lane>& lanes, AtomicCounters& counters, const RunLimits& limits) {
  std::array<ibv_wc, poll_batch> wcs{};
  for (std::size_t l = 0; l < lanes.size(); ++l) {
    const auto& lane = lanes[l];
    auto& landed = *reinterpret_cast<volatile std::uint64_t*>(lane.local_address);
    landed = ~std::uint64_t{0};
    ibv_sge sge{};
    ibv_send_wr wr{};
    build_send(SendRequest{.id = WorkId{.kind = WorkKind::rdma_read, .owner = 0, .sequence = 0},
                           .opcode = IBV_WR_RDMA_READ,
                           .local = ibv_sge{.addr = lane.local_address, .length = bw::atomic_size, .lkey = lane.lkey},
                           .flags = IBV_SEND_SIGNALED,
                           .remote_address = lane.remote_address,
                           .rkey = lane.rkey},
               wr, sge);
    post(lane.qp, &wr, bw::atomic_size);
    SilenceBound silence(limits.timeout);
    SpinGuard spin(limits.stop_fd);
    for (bool read = false; !read;) {
      const int got = poll_lane(lane, wcs);
      for (int k = 0; k < got; ++k) {
        const auto& wc = wcs[static_cast<std::size_t>(k)];
        if (wc.status != IBV_WC_SUCCESS) fail_completion(wc);
        read = read || wc.opcode == IBV_WC_RDMA_READ;
      }
      if (read || !spin.due()) continue;
      silence.check(Clock::now(), [&] {
        return fmt::format("no answer to the read of the atomic counter for {} ms", silence.limit_ms());
      });
      spin.check_stop("while reading the atomic counters back");
    }
    if (!matches_counter(landed, counters.done[l], counters.order)) {
      throw ProtocolError(fmt::format("queue pair {}'s counter on the server holds {} after {} {} operations", l,
                                      static_cast<std::uint64_t>(landed), counters.done[l], to_string(counters.kind)));
    }
  }
}

}  // namespace rdmakit
