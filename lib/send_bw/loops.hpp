#pragma once
// The measurement loops of send_bw. Bandwidth: a sender that keeps `depth` work requests
// in flight on each of its queue pairs (post lists, selective signalling, inline sends for
// small messages) and a receiver that keeps receives posted, records what arrives and, for
// a bidirectional test, sends every message back. Latency: a client that times one
// message at a time and a server that answers each. None allocates or logs inside the
// loop; all busy-poll (or, with `events`, sleep on the completion channel), checking the
// clock, the stop signal and the connection only when the CQ is empty, so a lost peer or
// Ctrl-C still ends them within the timeout.

#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lib/base/stats.hpp"
#include "lib/base/wait.hpp"
#include "lib/rdma/work_id.hpp"
#include "lib/rdma/work_request.hpp"
#include "lib/send_bw/bw_messages.hpp"
#include "lib/send_bw/lane.hpp"
#include "lib/send_bw/pacing.hpp"

namespace rdmakit {

// Reads each lane's counter (an RDMA READ of its 8 bytes into the lane's local buffer) and
// throws ProtocolError naming the first that does not hold what `counters` says was done, in
// the byte order learnt so far (and learns it, when the run's fetches did not tell).
void check_atomic_counters(const std::vector<Lane>& lanes, AtomicCounters& counters, const RunLimits& limits);

// Posts `count` receives into the lane's receive buffer.
void post_receives(const Lane& lane, std::uint32_t count);

// What every loop takes from its connection and its flags.
struct LoopBasics {
  std::uint32_t max_inline_data = 0;  // sends this small go inline
  // Client loops: the timeout bounds a silent CQ. Server loops: the stop signal only; they
  // end with the connection (PeerWatch), not a timeout.
  RunLimits limits;
  bool events = false;  // -e: sleep on the completion channel when the CQs are empty
};

// How a server's loop notices that its peer has gone.
struct PeerWatch {
  std::function<bool()> connected;  // asked when the CQs are empty; false: drain what is left, then end
  // Ends the loop (RunStopped, timed_out) when nothing arrives for this long although the
  // peer still seems connected: a link that dies takes its DISCONNECTED with it (rdma_mesh).
  std::optional<std::chrono::milliseconds> silence;
  // Where the peer's work shows nothing in this loop (one-sided WRITE and READ, atomics):
  // asked when the silence bound passes; true when something else says the peer is still at
  // work (the port's counters moved), which gives it the bound again. None: the bound ends it.
  std::function<bool()> still_working;
  std::string still_working_sign;  // what still_working looks at, for the timeout's message
  // The connections' CM event channels: with events, an idle loop sleeps until one of them
  // (the peer gone), a completion, Ctrl-C or the silence bound; without, it wakes every 20 ms
  // to ask `connected`.
  std::vector<int> cm_fds;
};

// A one-sided stream (RDMA WRITE, READ, atomics) never reaches the server's receives, so
// the server cannot tell a client at work from one that has gone silent; the port's counters
// cannot either where other traffic shares the port. The client therefore SENDs a zero-length
// heartbeat on its first lane every `period`, one in flight at a time (its queue pair has a
// send slot more than the stream's depth for it), across all of a run's rows. The server
// takes the first as the client's promise that its silence means it has gone
// (SinkSettings::one_sided).
inline constexpr std::chrono::milliseconds heartbeat_period{250};
class Heartbeat {
 public:
  explicit Heartbeat(std::chrono::nanoseconds period) : period_(period) {}
  // Sends one on `lane` when one is due and the last has completed.
  void beat_if_due(const Lane& lane, Clock::time_point now);
  // Whether a completion (its decoded work id) is a heartbeat's, which the stream's ledger
  // does not count.
  bool completed(const WorkId& id);

 private:
  std::chrono::nanoseconds period_;
  Clock::time_point next_;  // the epoch: the first at once
  bool in_flight_ = false;
};

// iWARP SEND streams, one per lane across the run's rows (lib/send_bw/bw_messages.hpp's credits):
// what the server has granted, what went out, and the last total its credit message said.
struct SendCredits {
  std::uint64_t granted = bw::stream_credits;
  std::uint64_t sent = 0;
  std::uint32_t reported = 0;
  std::uint64_t allowed() const { return granted > sent ? granted - sent : 0; }
  // A credit message's total, modulo 2^32: it only grows, so one that seems to go back is an
  // older message read late, and grants nothing.
  void grant(std::uint32_t total) {
    const std::uint32_t more = total - reported;
    if (more >= (std::uint32_t{1} << 31)) return;
    granted += more;
    reported = total;
  }
};

struct StreamSettings {
  LoopBasics basics;
  std::vector<Lane> lanes;
  bw::Operation operation = bw::Operation::send;
  std::uint32_t depth = 128;        // work requests in flight per queue pair
  std::uint32_t signal_every = 64;  // one signalled completion per this many requests
  // SEND only: the server sends every message back; the run also waits for those, and the
  // row counts both directions, as perftest's -b does.
  bool bidirectional = false;
  // --rate-limit: posts held back to keep to this many messages a second (all lanes
  // together); none: as fast as the queues allow.
  std::optional<double> messages_per_s;
  // --interval: the run's messages per interval of this length, appended to `intervals`.
  std::optional<std::chrono::nanoseconds> interval;
  std::vector<IntervalSample>* intervals = nullptr;
  // Called as each interval ends, with the message size (progress while the run goes on).
  std::function<void(const IntervalSample&, std::uint32_t)> interval_done;
  AtomicCounters* atomics = nullptr;  // --op atomic: required; advanced by what completed
  // When given: each lane's messages of a stream that finished are added to its entry (-c
  // UD: the counts its end-of-stream message says were sent).
  std::vector<std::uint64_t>* lane_sends = nullptr;
  // SEND on iWARP: a lane sends no more than its credits allow, and the receives that arrive
  // are the server's credit messages; none: RNR retries pace the stream (RoCE, InfiniBand).
  std::vector<SendCredits>* credits = nullptr;
  // One-sided operations against our server: the client's heartbeat (above); none for a
  // SEND stream, whose messages the server sees.
  Heartbeat* heartbeat = nullptr;
};

// Sends messages of `size` bytes on every lane and appends the row (all lanes together).
// Throws RunStopped on timeout or Ctrl-C, CompletionError on an error completion; what
// completed before that is still appended as a (partial) row.
void stream(const StreamSettings& settings, std::uint32_t size, const Budget& budget, std::vector<BandwidthRow>& rows);

struct SinkSettings {
  LoopBasics basics;
  PeerWatch peer;
  std::vector<Lane> lanes;  // receives already posted (before the accept)
  std::uint32_t depth = 512;
  bool reflect = false;  // send every message back (the server of a bidirectional test)
  // SEND on iWARP: a credit message back after every credit_batch receives reposted.
  bool credits = false;
  // -c UD: a tally per lane; a lane ends with its client's end-of-stream message (there is
  // no disconnect), and each datagram's size is what follows its GRH.
  std::vector<DatagramTally>* datagrams = nullptr;
  // The client's stream is one-sided (WRITE, READ, atomics): what arrives is its heartbeat
  // (Heartbeat above), which is progress but no message of a row. From the first one on, the
  // peer's silence ends the loop: PeerWatch::still_working is no longer asked (an older
  // client sends none, and keeps the port's counters as its sign of life).
  bool one_sided = false;
};

// Receives until every lane's peer has disconnected (or Ctrl-C), one row per message size,
// timed from its first arrival to its last; rows so far survive an exception.
void sink(const SinkSettings& settings, std::vector<BandwidthRow>& rows);

// Latency, one message in flight. The client announces each size with a zero-length
// SEND-with-immediate carrying the size and waits for the server's echo of it; then:
//   send:  SEND, the server SENDs the same length back; sample = round trip / 2
//   write: RDMA WRITE into the server's buffer, whose last byte the server polls, then
//          writes the same bytes back into ours; sample = round trip / 2
//   read:  RDMA READ of the server's buffer; sample = the whole read
//   atomic: one fetch-and-add or compare-and-swap on the server's counter; sample = the
//          whole operation, its fetched value checked
// (the halving and the full read are perftest's conventions for ib_*_lat).

struct PingSettings {
  LoopBasics basics;  // the timeout bounds the wait for each answer; events: send and read only
  Lane lane;          // receives posted
  bw::Operation operation = bw::Operation::send;
  bool histogram = false;  // each row with its samples' histogram
  // --op atomic: required (one lane); each operation's fetched value is checked against it.
  AtomicCounters* atomics = nullptr;
  // false: the peer is perftest's (send_bw --oob), which knows the size from its own -s and
  // answers from the first message; no announcement goes first.
  bool announces_size = true;
  // -c UD (the lane's peer has an address handle): each size's pings sent, warm-up
  // included, appended here. A ping is a SEND with a tag as immediate that the server
  // echoes; one unanswered for ping_loss_timeout is counted and the next one goes out.
  std::vector<bw::SizeCount>* datagrams_sent = nullptr;
};

// Receives either side of a latency test keeps posted: one message is in flight at a time
// (with send_bw at the other end, its size announcements too).
inline constexpr std::uint32_t latency_receives = 16;

// -c UD latency: how long a ping waits for its answer before it counts as lost.
inline constexpr auto ping_loss_timeout = std::chrono::milliseconds(200);

// Appends the row for `size`; on an exception, the samples so far as a partial row.
void ping(const PingSettings& settings, std::uint32_t size, const Budget& budget, std::uint64_t warmup,
          std::vector<LatencyRow>& rows);

// perftest's write latency (ib_write_lat), either side: each writes its k-th message (its
// last byte k mod 256) into the peer's buffer, the leader (perftest's server) once the peer's
// (k-1)-th has landed in its own (its first at once), the other side once the leader's k-th
// has; every write signalled. A sample is half the
// time between two of this side's writes: a round trip, as perftest counts it. The leader
// waits for the peer's last write too. Appends one row (a partial one on an exception).
struct LockstepSettings {
  LoopBasics basics;  // the timeout bounds each wait for the peer's write
  Lane lane;          // remote_address/rkey: the peer's buffer; receive_address: where its writes land (zeroed)
  bool leader = false;
  bool histogram = false;  // the row with its samples' histogram
};
void lockstep_writes(const LockstepSettings& settings, std::uint32_t size, std::uint64_t iterations,
                     std::vector<LatencyRow>& rows);

struct AnswerSettings {
  LoopBasics basics;  // events: send and read only (write answers watch memory)
  PeerWatch peer;
  Lane lane;  // receives posted; remote_address/rkey: the client's reply buffer (write)
  bw::Operation operation = bw::Operation::send;
  // -c UD: the pings counted per size; answering ends with the client's end-of-stream
  // message (kept in the tally). The answers go to the address of the first datagram.
  DatagramTally* datagram = nullptr;
  DatagramReturn reply_from;
};

// The server side of ping(): answers until the client disconnects; returns how many
// messages it answered.
std::uint64_t answer_pings(const AnswerSettings& settings);

}  // namespace rdmakit
