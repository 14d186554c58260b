#pragma once
// The accounting of the measurement loops (lib/send_bw/loops.cpp), apart from their posting
// and polling so that it is tested without a device: which request is signalled, the peak
// rate, when a duration budget closes, each queue pair's progress, the latency loops' send
// backlog, and the sink's per-size runs and reflections. The methods the measured loops
// call are defined here so they inline; nothing here allocates or logs once constructed
// (except the sink's first message of a new size, which opens its run).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "lib/base/stats.hpp"
#include "lib/base/wait.hpp"
#include "lib/rdma/work_id.hpp"

namespace rdmakit {

// How long a measurement runs: `iterations` per queue pair, or for `duration` when set.
struct Budget {
  std::uint64_t iterations = 0;
  std::optional<std::chrono::nanoseconds> duration;
};

// At most this many bytes in flight between two signalled requests, so a silent CQ never
// hides more than that and the silence timeout stays meaningful for large messages.
inline constexpr std::uint64_t bytes_between_signals = 16U << 20;

// Latency loops signal one send in this many (the send queue drains without a poll per message).
inline constexpr std::uint32_t latency_signal_every = 16;

// Signalling interval for a queue depth: half the queue, at most 64, so the queue refills
// while earlier requests complete.
std::uint32_t signal_interval(std::uint32_t depth);

// Which requests of a queue pair are signalled. Requests are numbered from 1.
class SignalSchedule {
 public:
  explicit constexpr SignalSchedule(std::uint32_t every) : every_(every) {}
  // One in `at_most`, or more often when `size`-byte messages would put more than
  // bytes_between_signals between two signals.
  static SignalSchedule for_message_size(std::uint32_t size, std::uint32_t at_most) {
    return SignalSchedule(
        static_cast<std::uint32_t>(std::clamp<std::uint64_t>(bytes_between_signals / size, 1, at_most)));
  }
  constexpr std::uint32_t every() const { return every_; }
  constexpr bool every_nth(std::uint64_t number) const { return number % every_ == 0; }
  // The last request is signalled too, so its completion ends the run.
  constexpr bool signalled(std::uint64_t number, std::uint64_t last) const {
    return every_nth(number) || number == last;
  }

 private:
  std::uint32_t every_;
};

// The best rate over windows of at least `window_messages` messages, each window starting
// where the previous one ended.
class PeakRate {
 public:
  PeakRate(std::uint64_t window_messages, Clock::time_point started)
      : window_messages_(window_messages), window_started_(started) {}
  // `total` messages were done by `now`.
  void record(std::uint64_t total, Clock::time_point now) {
    const std::uint64_t messages = total - window_start_total_;
    if (messages < window_messages_) return;
    const std::chrono::nanoseconds interval = now - window_started_;
    // messages / interval > fastest_messages / fastest, without division.
    if (fastest_messages_ == 0 || messages * static_cast<std::uint64_t>(fastest_.count()) >
                                      fastest_messages_ * static_cast<std::uint64_t>(interval.count())) {
      fastest_ = interval;
      fastest_messages_ = messages;
    }
    window_started_ = now;
    window_start_total_ = total;
  }
  // Zero (and zero messages) while no window has closed.
  std::chrono::nanoseconds fastest() const { return fastest_; }
  std::uint64_t fastest_messages() const { return fastest_messages_; }

 private:
  std::uint64_t window_messages_;
  Clock::time_point window_started_;
  std::uint64_t window_start_total_ = 0;
  std::chrono::nanoseconds fastest_ = std::chrono::nanoseconds::zero();
  std::uint64_t fastest_messages_ = 0;
};

inline std::uint64_t round_up(std::uint64_t value, std::uint64_t step) {
  return (value + step - 1) / step * step;
}

// Software pacing (send_bw --rate-limit): how many messages a sender may post now to keep
// to `messages_per_s` from `started` on. The first may go at once. A sender held up (a
// stall, a descheduled process) catches up by at most `catch_up` of the rate: owed more, it
// is forgiven the rest, so no burst at line rate follows a stall (one did: 6.4 MiB/s in an
// interval of a 4 MiB/s run, beside busy cases).
class RatePacer {
 public:
  static constexpr std::chrono::milliseconds catch_up{50};
  RatePacer(double messages_per_s, Clock::time_point started)
      : rate_(messages_per_s),
        started_(started),
        burst_(std::max<std::uint64_t>(
            1, static_cast<std::uint64_t>(messages_per_s * std::chrono::duration<double>(catch_up).count()))) {}
  // `posted` having been.
  std::uint64_t allowance(std::uint64_t posted, Clock::time_point now) {
    const double elapsed = std::chrono::duration<double>(now - started_).count();
    const auto earned = static_cast<std::uint64_t>(rate_ * elapsed) + 1;
    const auto allowed = earned > forgiven_ ? earned - forgiven_ : 0;
    if (allowed <= posted) return 0;
    if (allowed - posted > burst_) forgiven_ += allowed - posted - burst_;
    return std::min(allowed - posted, burst_);
  }

 private:
  double rate_;
  Clock::time_point started_;
  std::uint64_t burst_;
  std::uint64_t forgiven_ = 0;  // messages the rate earned while the sender was held up
};

// One interval of a timed run (send_bw --interval): the messages done in it.
struct IntervalSample {
  double end_s = 0;    // since the run started
  double seconds = 0;  // its length (the last one may be shorter)
  std::uint64_t messages = 0;
};

// Cuts a run's running total of messages into intervals of `every`, from `started`. Fed
// with the total whenever it moves; an interval closes at the first feed at or past its end.
class IntervalRecorder {
 public:
  IntervalRecorder(std::chrono::nanoseconds every, Clock::time_point started)
      : every_(every), started_(started), last_(started), next_(started + every) {}
  void record(std::uint64_t total, Clock::time_point now) {
    if (now < next_) return;
    close(total, now);
    while (next_ <= now) next_ += every_;
  }
  // The rest of the run as a last (shorter) interval, if it did anything.
  void finish(std::uint64_t total, Clock::time_point now) {
    if (total > last_total_) close(total, now);
  }
  const std::vector<IntervalSample>& samples() const { return samples_; }

 private:
  void close(std::uint64_t total, Clock::time_point now) {
    samples_.push_back({.end_s = std::chrono::duration<double>(now - started_).count(),
                        .seconds = std::chrono::duration<double>(now - last_).count(),
                        .messages = total - last_total_});
    last_total_ = total;
    last_ = now;
  }
  std::chrono::nanoseconds every_;
  Clock::time_point started_;
  Clock::time_point last_;
  Clock::time_point next_;
  std::uint64_t last_total_ = 0;
  std::vector<IntervalSample> samples_;
};

// The bandwidth sender's accounting: per queue pair, what was posted, completed and (in a
// bidirectional test) received back, against a target; the budget; the peak; the row.
class StreamLedger {
 public:
  struct LaneProgress {
    std::uint64_t posted = 0;
    std::uint64_t completed = 0;
    std::uint64_t received = 0;
    std::uint64_t target = 0;
  };

  StreamLedger(std::size_t lanes, const Budget& budget, SignalSchedule schedule, bool bidirectional,
               Clock::time_point started);

  // How many requests `lane` may post now: at most `batch`, never past its target nor
  // beyond `depth` in flight.
  std::uint32_t postable(std::size_t lane, std::uint32_t batch, std::uint32_t depth) const {
    const LaneProgress& p = lanes_[lane];
    if (p.posted >= p.target || p.posted - p.completed >= depth) return 0;
    return static_cast<std::uint32_t>(
        std::min<std::uint64_t>({batch, p.target - p.posted, depth - (p.posted - p.completed)}));
  }
  // The number the next request of `lane` carries, `ahead` requests on.
  std::uint64_t next_number(std::size_t lane, std::uint32_t ahead) const { return lanes_[lane].posted + ahead + 1; }
  bool signalled(std::size_t lane, std::uint64_t number) const {
    return schedule_.signalled(number, lanes_[lane].target);
  }
  void posted(std::size_t lane, std::uint32_t count) { lanes_[lane].posted += count; }
  // RC completes in order: a signalled request's completion finishes every one up to it.
  // `sequence`: its number modulo 2^32, as its id carries it.
  void completed_through(std::size_t lane, std::uint32_t sequence) {
    const std::uint64_t number = WorkId::unwrap(sequence, lanes_[lane].completed);
    total_ += number - lanes_[lane].completed;
    lanes_[lane].completed = number;
  }
  void received(std::size_t lane, std::uint32_t count) {
    lanes_[lane].received += count;
    total_ += count;
  }
  // Completions arrived at `now`.
  void progressed(Clock::time_point now) {
    peak_.record(total_, now);
    last_completion_ = now;
    close_if_due(now);
  }
  // A duration budget ends at the next signalled request of each lane, so the last
  // completion still comes.
  void close_if_due(Clock::time_point now) {
    if (!open_ended_ || now < ends_) return;
    for (auto& p : lanes_) p.target = round_up(p.posted, schedule_.every());
    open_ended_ = false;
  }
  bool finished() const {
    return std::all_of(lanes_.begin(), lanes_.end(), [&](const LaneProgress& p) {
      return p.completed == p.target && (!bidirectional_ || p.received >= p.target);
    });
  }
  // Messages done, both directions counted.
  std::uint64_t total() const { return total_; }
  // Requests completed on all lanes (the sender's direction only).
  std::uint64_t completed() const;
  // Requests posted on all lanes.
  std::uint64_t posted_on(std::size_t lane) const { return lanes_[lane].posted; }
  std::uint64_t posted() const {
    std::uint64_t sum = 0;
    for (const auto& p : lanes_) sum += p.posted;
    return sum;
  }
  const LaneProgress& lane(std::size_t lane) const { return lanes_[lane]; }
  BandwidthRow row(std::uint32_t size) const;

 private:
  std::vector<LaneProgress> lanes_;
  SignalSchedule schedule_;
  bool bidirectional_;
  bool open_ended_;
  Clock::time_point started_;
  Clock::time_point ends_;
  Clock::time_point last_completion_;
  PeakRate peak_;
  std::uint64_t total_ = 0;
};

// The sends of a latency loop, one in latency_signal_every signalled: how many were posted
// and how many are known complete. Their ids (lib/rdma/work_id.hpp) carry `generation` as
// owner, so the completions of an earlier ledger on the same queue (the previous size's
// last signalled send may complete after it has gone) are told apart.
class SendBacklog {
 public:
  explicit SendBacklog(std::uint32_t generation) : generation_(generation & WorkId::owner_mask) {}
  // Counts a send and returns its id.
  WorkId next_id() {
    return WorkId{.kind = WorkKind::send, .owner = generation_, .sequence = static_cast<std::uint32_t>(++posted_)};
  }
  // Whether the send counted last is signalled.
  bool signalled(bool always) const { return always || schedule_.every_nth(posted_); }
  // A send completion's id; one of another generation is ignored.
  void completed(WorkId id) {
    if (id.owner == generation_) completed_ = std::max<std::uint64_t>(completed_, id.sequence);
  }
  // Time to poll: two signalling intervals of sends are unaccounted for.
  bool backlog() const { return posted_ - completed_ >= std::uint64_t{2} * latency_signal_every; }

 private:
  static constexpr SignalSchedule schedule_{latency_signal_every};
  std::uint32_t generation_;
  std::uint64_t posted_ = 0;
  std::uint64_t completed_ = 0;
};

// The bandwidth receiver's accounting: one run per message size (timed from its first
// arrival to its last) and, when it reflects, per queue pair what it owes the client.
class SinkLedger {
 public:
  SinkLedger(std::size_t lanes, bool reflect, SignalSchedule schedule)
      : lanes_(lanes), reflect_(reflect), schedule_(schedule) {}

  // A `size`-byte message arrived on `lane` at `now`. Reflecting, throws ProtocolError when
  // the client moved to another size while messages of the previous one are unanswered.
  void arrived(std::size_t lane, std::uint32_t size, Clock::time_point now);

  // One reflection to post.
  struct Reflection {
    std::uint64_t number = 0;
    std::uint32_t size = 0;
    bool signalled = false;
  };
  // Whether `lane` owes a reflection it may post with `depth` sends in flight.
  bool owes(std::size_t lane, std::uint32_t depth) const {
    const Lane& r = lanes_[lane];
    return r.owed > 0 && r.posted - r.completed < depth;
  }
  // The next reflection of `lane`, counted as posted; the last one owed is signalled.
  Reflection next_reflection(std::size_t lane) {
    Lane& r = lanes_[lane];
    const std::uint64_t number = r.posted + 1;
    const Reflection reflection{
        .number = number, .size = r.owed_size, .signalled = schedule_.signalled(number, number + r.owed - 1)};
    r.posted = number;
    --r.owed;
    return reflection;
  }
  // A signalled reflection completed; `sequence`: its number modulo 2^32.
  void completed_through(std::size_t lane, std::uint32_t sequence) {
    lanes_[lane].completed = WorkId::unwrap(sequence, lanes_[lane].completed);
  }
  std::uint64_t owed(std::size_t lane) const { return lanes_[lane].owed; }

  // The peer is gone and `lane`'s work requests were flushed.
  void close(std::size_t lane) { lanes_[lane].closed = true; }
  bool closed(std::size_t lane) const { return lanes_[lane].closed; }
  bool all_closed() const {
    return std::all_of(lanes_.begin(), lanes_.end(), [](const Lane& r) { return r.closed; });
  }

  // Appends one row per size, smallest first, and forgets the runs.
  void close_runs(std::vector<BandwidthRow>& rows);

 private:
  struct Run {
    std::uint64_t messages = 0;
    Clock::time_point first;
    Clock::time_point last;
  };
  struct Lane {
    bool closed = false;
    std::uint64_t owed = 0;  // messages received and not yet sent back
    std::uint32_t owed_size = 0;
    std::uint64_t posted = 0;
    std::uint64_t completed = 0;
  };
  std::map<std::uint32_t, Run> runs_;  // a sweep never repeats a size
  std::vector<Lane> lanes_;
  bool reflect_;
  SignalSchedule schedule_;
};

}  // namespace rdmakit
