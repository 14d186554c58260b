#pragma once
// What the measurement loops (lib/send_bw/loops) hold and count per queue pair: the lane, a
// datagram receiver's tally, where a datagram server answers from, and the atomics' counters.
// Its own header, so that the loops' helpers (loop_support, datagram_end) use these without
// including the loops they serve.

#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/rdma/work_request.hpp"
#include "lib/send_bw/bw_messages.hpp"

namespace rdmakit {

// One connected queue pair as the loops see it.
struct Lane {
  ibv_qp* qp = nullptr;
  ibv_cq* cq = nullptr;  // takes both send and receive completions
  // What we send, write or read into.
  std::uint64_t local_address = 0;
  std::uint32_t lkey = 0;
  // The peer's buffer for RDMA WRITE/READ.
  std::uint64_t remote_address = 0;
  std::uint32_t rkey = 0;
  // Where messages from the peer land (each receive takes the whole of it).
  std::uint64_t receive_address = 0;
  std::uint32_t receive_lkey = 0;
  std::uint32_t receive_length = 0;
  // -c UD: where the sender's datagrams go (no ah: a connected lane). A datagram lane's
  // receive_length holds the GRH in front of the message.
  DatagramAddress peer;
  // false where the device carries no immediate data (iWARP): the latency test's size
  // announcements are SENDs of their own (lib/send_bw/bw_messages' size message).
  bool immediate_data = true;
};

// -c UD, the receiving side: a lane's datagrams counted per size (in the order the sizes
// came), and the client's end-of-stream message (lib/send_bw/datagram_end) once it came,
// with what the reply to it needs.
struct DatagramTally {
  std::vector<bw::SizeCount> received;
  std::optional<std::vector<std::uint8_t>> end;
  ibv_wc end_completion{};
  ibv_grh end_grh{};
};

// Where a datagram server's answers go from: the lane's protection domain and port, for the
// address handle made from the client's datagram.
struct DatagramReturn {
  ibv_pd* pd = nullptr;
  std::uint8_t port = 1;
};

// --op atomic: which atomic, and each lane's counter on the server as the operations so far
// leave it (each lane's own 8 bytes, from 0). Fetch-and-add adds 1; compare-and-swap swaps
// the count it expects for one more, so either way the counter counts the operations, and a
// compare that missed (or a lost add) shows in the final value (check_atomic_counters).
enum class AtomicKind : std::uint8_t { fetch_add, compare_swap };

// The byte order the responder keeps its counters in, as the requester sees them: a device
// that does its atomics big-endian (ConnectX-3's "reply BE") hands a little-endian host every
// fetched value, and every counter read back, byte-swapped. Unknown until a value tells
// (0, and any palindrome, reads the same both ways).
enum class AtomicByteOrder : std::uint8_t { unknown, host, swapped };

struct AtomicCounters {
  AtomicKind kind = AtomicKind::fetch_add;
  std::vector<std::uint64_t> done;  // per lane
  AtomicByteOrder order = AtomicByteOrder::unknown;
};
std::string to_string(AtomicKind kind);        // "fetch-add", "compare-swap"
std::string to_string(AtomicByteOrder order);  // "unknown", "host", "swapped"

// Whether `seen` is the `expected` count in the order known so far, learning the order from
// the first value that tells. False for any other value, and for a value in the other order
// than the one learnt.
bool matches_counter(std::uint64_t seen, std::uint64_t expected, AtomicByteOrder& order);

}  // namespace rdmakit
