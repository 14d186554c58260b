#pragma once
// perftest's out-of-band exchange as a conversation over a connected TCP socket: the
// messages of lib/send_bw/perftest_exchange in the order and lock-step perftest keeps (the
// client writes each message first, the server answers with one of the same size), every
// wait bounded. What a perftest program does between the messages (its QPs to RTR and RTS,
// its run) is the caller's; `program_steps` says where it goes.

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lib/base/wait.hpp"
#include "lib/send_bw/bw_messages.hpp"
#include "lib/send_bw/perftest_exchange.hpp"

namespace rdmakit::bw::perftest {

// What both sides settled on before the first record.
struct Agreed {
  PeerVersion peer;
  Geometry geometry;
  int mtu = 3;  // the smaller of the two sides' (ibv_mtu)
};

// One step of a perftest bandwidth program's conversation, from either side.
enum class Step : std::uint8_t {
  records,  // one record per QP each way
  connect,  // no message: the QPs to RTR (and RTS where this side sends)
  barrier,  // record 0 each way
  run,      // no message: the measurement
  results,  // the client's five figures (WRITE, READ and atomics)
  close,    // record 0 each way, then "done\0" and the end of the connection
};
// The steps of perftest's program for `operation` and `test` (bandwidth, SEND: ib_send_bw;
// WRITE, READ and atomics: ib_write_bw, ib_read_bw, ib_atomic_bw; latency: ib_send_lat,
// ib_write_lat, ib_read_lat), one size, one direction, as 4.5-0.17 and upstream's master run
// them. Both sides take the same steps; what a side does at `run` is its own (a READ
// latency server waits there for the client's close).
std::vector<Step> program_steps(Operation operation, Test test = Test::bandwidth);

class Conversation {
 public:
  // `fd`: the connected socket (the caller keeps it open); `client`: whether this side writes
  // first; `timeout`: how long each message may take; `stop_fd`: Ctrl-C (-1: none).
  Conversation(int fd, bool client, std::chrono::milliseconds timeout, int stop_fd);

  // Version, page size, cache line and path MTU; ProtocolError for what perftest would not
  // have sent (lib/send_bw/perftest_exchange).
  Agreed open(const Geometry& ours, int our_mtu);
  // One record per QP each way. `with_gid`: this side's records carry a GID, and so must the
  // peer's (both sides decide from their own GID setting).
  std::vector<Destination> exchange_records(const std::vector<Destination>& ours, bool with_gid);
  // Record 0 each way, the peer's checked against the one it sent first: perftest builds its
  // requests from the last copy, and sends the same every time.
  void barrier(const Destination& ours, bool with_gid);
  // The client's figures after a one-sided run (the server's answers ignored, as perftest's
  // client ignores them), and the server's side of the same.
  void send_results(const Results& results);
  Results receive_results();
  // The last barrier, "done\0", and the peer's end of the connection awaited (up to the
  // timeout) so that a perftest that writes its own "done" never writes into a closed socket.
  void close(const Destination& ours, bool with_gid);

 private:
  // Ours out and theirs in (the client's order) or theirs in and ours out (the server's).
  std::vector<std::uint8_t> exchange(std::span<const std::uint8_t> ours, std::size_t size, const char* what);

  int fd_;
  bool client_;
  std::chrono::milliseconds timeout_;
  int stop_fd_;
  std::optional<std::vector<std::uint8_t>> first_peer_record_;
};

}  // namespace rdmakit::bw::perftest
