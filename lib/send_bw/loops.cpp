#include "lib/send_bw/loops.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <span>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"
#include "lib/base/wait.hpp"
#include "lib/rdma/verbs.hpp"
#include "lib/rdma/work_request.hpp"
#include "lib/send_bw/loop_support.hpp"

namespace rdmakit {

// The loops' shared polling, posting and idle checks (lib/send_bw/loop_support).
using namespace loop;

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

// The lanes an idle loop sleeps on: none unless completion events were asked for.
std::span<const Lane> sleep_lanes(bool events, const std::vector<Lane>& lanes) {
  return choose_completion_mode(events) == CompletionMode::events ? std::span<const Lane>(lanes)
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
      if (drain_until && Clock::now() >= *drain_until) {
        // The receives should have flushed (Endpoint moves the QP to the error state on the
        // peer's DISCONNECTED): what arrived so far is what is counted.
        spdlog::warn("the client disconnected, but its receives still posted here did not flush within 1 s");
        break;
      }
      spin.check_stop("while receiving");
    }
  } catch (...) {
    ledger.close_runs(rows);
    throw;
  }
  ledger.close_runs(rows);
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
