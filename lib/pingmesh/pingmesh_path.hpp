#pragma once
// One rdma_pingmesh path (this node to one peer): the probes in flight and what came back
// (PathProbes), each window's figures, and the path's state over the windows (PathJudge).
// No RDMA and no wire format here: the session feeds it times and the fields of decoded
// messages (lib/pingmesh/pingmesh_probe), the unit tests the same.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lib/base/stats.hpp"
#include "lib/rdma/completion_clock.hpp"

namespace rdmakit::pingmesh {

// unknown: no window judged yet (or none with a probe resolved).
enum class PathState : std::uint8_t { unknown, ok, lossy, slow, down };
std::string_view to_string(PathState state);
inline bool is_bad(PathState state) {
  return state == PathState::lossy || state == PathState::slow || state == PathState::down;
}

// What one window saw on one path. A probe belongs to the window in which it was sent
// (sent), and to the window in which its fate was known: answered, or lost when its answer
// timeout ran out. loss_ratio is lost / (answered + lost) of the latter, less the probes
// lost in an outage: those sent while the path was down, before its first answer since.
// The window in which a path comes back counts them in `lost` but is judged without them:
// else a path that recovers goes down -> lossy -> ok.
struct WindowFigures {
  std::uint64_t sent = 0;
  std::uint64_t answered = 0;
  std::uint64_t lost = 0;
  std::uint64_t lost_in_outage = 0;  // of `lost`
  std::uint64_t late = 0;            // answers that came after their probe was counted lost
  std::uint64_t unexpected = 0;      // answers to no probe in flight: duplicates, replays, forgeries
  // Of the round trips in `rtt`, those taken on the devices' completion clocks (both ends
  // stamp); the rest are the hosts' clocks.
  std::uint64_t device_samples = 0;
  // Answers whose peer had sent stamps before but whose own stamps did not come within the
  // answer timeout: measured on the hosts' clocks instead.
  std::uint64_t stamps_missing = 0;
  double loss_ratio = 0;
  // The network's round trip: the prober's round trip less the responder's own delay.
  std::optional<LatencySummary> rtt;
  std::optional<LatencySummary> responder_delay;
};

// A probe to send: the run it belongs to, its number on the path, when it left.
struct ProbeTicket {
  std::uint64_t session = 0;
  std::uint64_t sequence = 0;
  std::uint64_t sent_ns = 0;
};

// What an answer says of its probe: the run and number it names, the send time it echoes,
// and the responder's own delay (its send time less its receive time). Stamps say the same,
// their delay on the responder's device clock.
struct AnswerFields {
  std::uint64_t session = 0;
  std::uint64_t sequence = 0;
  std::uint64_t echoed_sent_ns = 0;
  std::uint64_t responder_delay_ns = 0;
};

class PathProbes {
 public:
  // At most this many probes in flight on one path; beyond it the oldest counts as lost.
  static constexpr std::size_t max_in_flight = 4096;
  // Probes counted lost whose late answers are still told apart from unexpected ones.
  static constexpr std::size_t remembered_lost = 4096;

  // `device`: this node's completion clock, when its completions carry times. The round
  // trip is then taken from it wherever the peer sends stamps: from the probe's send
  // completion to the answer's receive completion, less the responder's device delay. Else,
  // and for any answer whose stamps do not come, from the hosts' clocks.
  PathProbes(std::uint64_t session, std::uint64_t answer_timeout_ns,
             std::optional<CompletionClock> device = std::nullopt)
      : session_(session), answer_timeout_ns_(answer_timeout_ns), device_(device) {}

  // The next probe on this path, in flight from `sent_ns` (the prober's monotonic clock).
  ProbeTicket next_probe(std::uint64_t sent_ns);
  // The probe's send completion, stamped `device_stamp` on this node's completion clock.
  void probe_left(std::uint64_t sequence, std::uint64_t device_stamp);

  enum class Match : std::uint8_t { answered, late, unexpected };
  // An answer that arrived at `received_ns` (and, where completions carry times, whose
  // receive completion is stamped `device_stamp`): answered only when it is this run's
  // (session), its probe is in flight and it echoes that probe's send time.
  Match take_answer(const AnswerFields& answer, std::uint64_t received_ns,
                    std::optional<std::uint64_t> device_stamp = std::nullopt);
  // Stamps of an answer (their responder_delay_ns is on the responder's device clock): the
  // answer's round trip taken on the devices' clocks when it waits for them. False when they
  // belong to no answer of this run (late, duplicated, forged).
  // The probe's send completion may be polled after its answer's receive: the answer then
  // waits for it too.
  bool take_stamps(const AnswerFields& stamps);

  // The window's figures, its probes whose timeout ran out by `now_ns` counted lost first;
  // the counts start again for the next window, the probes in flight carry over.
  WindowFigures close_window(std::uint64_t now_ns);

  std::size_t in_flight() const { return in_flight_.size(); }
  // Whether the peer sends stamps (so answers wait for them): since its first, until one
  // does not come.
  bool peer_stamps() const { return peer_stamps_; }

  // The path was judged down: every probe lost from now until the first answer belongs
  // to the outage, not to the window in which the path comes back.
  void outage_began() { in_outage_ = true; }

 private:
  struct InFlight {
    std::uint64_t sent_ns = 0;
    std::optional<std::uint64_t> device_sent;  // the send completion's stamp
  };
  // An answer whose round trip waits for its stamps (and, where its completion was polled
  // first, for its probe's send completion).
  struct AwaitingStamps {
    std::uint64_t echoed_sent_ns = 0;
    std::uint64_t host_round_trip_ns = 0;
    std::uint64_t host_delay_ns = 0;
    std::optional<std::uint64_t> device_sent;      // the probe's send completion
    std::uint64_t device_received = 0;             // the answer's receive completion
    std::optional<std::uint64_t> device_delay_ns;  // the stamps' responder delay
    std::uint64_t deadline_ns = 0;                 // host clock: the answer's arrival plus the answer timeout
  };

  void count_lost(std::uint64_t sequence);
  void expire(std::uint64_t now_ns);
  void add_sample(std::uint64_t round_trip_ns, std::uint64_t delay_ns);
  // The round trip of an answer whose device times are all known, taken.
  void complete(std::map<std::uint64_t, AwaitingStamps>::iterator waiting);

  std::uint64_t session_;
  std::uint64_t answer_timeout_ns_;
  std::optional<CompletionClock> device_;
  bool peer_stamps_ = false;
  std::uint64_t next_sequence_ = 0;
  std::map<std::uint64_t, InFlight> in_flight_;              // by sequence
  std::map<std::uint64_t, AwaitingStamps> awaiting_stamps_;  // by sequence
  std::deque<std::uint64_t> lost_sequences_;                 // the newest remembered_lost, in order
  bool in_outage_ = false;
  std::uint64_t outage_ended_at_ = 0;  // the sequence of the first probe answered after it
  WindowFigures window_;
  LatencyRecorder rtt_;
  LatencyRecorder responder_delay_;
};

struct Thresholds {
  double lossy_ratio = 0.01;  // loss above this in a window: lossy
  double slow_factor = 3.0;   // p99 above this many times the path's baseline p99: slow
  // A fixed p99 limit (seconds) instead of the learned baseline.
  std::optional<double> p99_limit_s;
  // The baseline is the median p99 of the path's first this-many ok windows.
  std::size_t baseline_windows = 6;
};

struct Verdict {
  PathState state = PathState::unknown;
  std::string why;  // one line, with the figures that made the state
};

class PathJudge {
 public:
  explicit PathJudge(Thresholds thresholds) : thresholds_(thresholds) {}

  // The window's state; a window in which no probe's fate was known keeps the last state.
  Verdict judge(const WindowFigures& window);
  PathState state() const { return state_; }
  // The learned baseline p99 in microseconds, once baseline_windows ok windows were seen.
  std::optional<double> baseline_p99_us() const { return baseline_p99_us_; }

 private:
  Thresholds thresholds_;
  PathState state_ = PathState::unknown;
  std::vector<double> learning_p99_us_;
  std::optional<double> baseline_p99_us_;
};

// Whether the window's states of this node's paths put the fault at this node (its NIC, its
// link, its netdev) rather than at its peers: at least two paths, and every one bad.
bool node_at_fault(std::span<const PathState> states);

}  // namespace rdmakit::pingmesh
