#pragma once
// The measurement loops of send_bw: a sender that keeps `depth` work requests in flight
// (post lists, selective signalling, inline sends for small messages) and a receiver that
// keeps receives posted and records what arrives. Neither allocates or logs inside the
// loop; both busy-poll, checking the clock, the stop signal and the connection only when
// the CQ is empty, so a lost peer or Ctrl-C still ends them within the timeout.

#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "lib/protocol.hpp"
#include "lib/stats.hpp"

namespace rdmakit {

struct StreamSettings {
  ibv_qp* qp = nullptr;
  ibv_cq* cq = nullptr;
  std::uint64_t local_address = 0;
  std::uint32_t lkey = 0;
  bw::Operation operation = bw::Operation::send;
  std::uint64_t remote_address = 0;  // write/read: the peer's buffer
  std::uint32_t rkey = 0;
  std::uint32_t depth = 128;                // work requests in flight
  std::uint32_t signal_every = 64;          // one signalled completion per this many requests
  std::uint32_t max_inline_data = 0;        // sends this small go inline
  std::chrono::milliseconds timeout{5000};  // bound on a silent CQ
  int stop_fd = -1;
};

// Signalling interval for a queue depth: half the queue, at most 64, so the queue refills
// while earlier requests complete.
std::uint32_t signal_interval(std::uint32_t depth);

// Sends `iterations` messages of `size` bytes and returns the row. Throws RunStopped on
// timeout or Ctrl-C, CompletionError on an error completion.
BandwidthRow stream(const StreamSettings& settings, std::uint32_t size, std::uint64_t iterations);

struct SinkSettings {
  ibv_qp* qp = nullptr;
  ibv_cq* cq = nullptr;
  std::uint64_t address = 0;
  std::uint32_t lkey = 0;
  std::uint32_t length = 0;  // one buffer every receive lands in (content is not checked)
  std::uint32_t depth = 512;
  int stop_fd = -1;
  std::function<bool()> connected;  // polled when the CQ is empty; false ends the sink
  std::function<void()> posted;     // called once the first receives are up (e.g. accept)
};

// Receives until the peer disconnects (or Ctrl-C), appending one row per run of equal
// message sizes, timed from first to last arrival; rows so far survive an exception.
void sink(const SinkSettings& settings, std::vector<BandwidthRow>& rows);

}  // namespace rdmakit
