#pragma once
// RAII over librdmacm's synchronous API (rdma_getaddrinfo, rdma_create_ep, rdma_reg_msgs,
// rdma_get_request), the flow rdma_cm(7) documents for simple tools. Synchronous ids block
// inside librdmacm; here their CM and completion channels are made non-blocking, so a call
// that would block returns EAGAIN and the wait happens with a deadline and the stop signal:
// completions through the one CQ waiter (lib/rdma/cq_waiter), as every loop waits, and CM
// events in await_readable(). What rdma_get_*_comp would do is done here, the sleep bounded.

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "lib/base/wait.hpp"
#include "lib/net/peer_gate.hpp"
#include "lib/rdma/addressing.hpp"
#include "lib/rdma/cm_flow.hpp"

namespace rdmakit {

struct Bounds {
  Clock::time_point deadline;
  int stop_fd = -1;
  std::string awaiting;  // for the timeout message
};

// Bounds for one wait: `timeout` from now.
inline Bounds within(std::chrono::milliseconds timeout, int stop_fd, std::string awaiting) {
  return {Clock::now() + timeout, stop_fd, std::move(awaiting)};
}

class SyncEndpoint {
 public:
  // rdma_create_ep: on the active side this resolves address and route and creates the QP.
  SyncEndpoint(const AddrInfo& info, ibv_qp_init_attr* qp_attributes);
  explicit SyncEndpoint(rdma_cm_id* adopted);
  ~SyncEndpoint();
  SyncEndpoint(SyncEndpoint&& other) noexcept;
  SyncEndpoint& operator=(SyncEndpoint&&) = delete;
  SyncEndpoint(const SyncEndpoint&) = delete;
  SyncEndpoint& operator=(const SyncEndpoint&) = delete;

  rdma_cm_id* get() const noexcept { return id_; }
  rdma_cm_id* operator->() const noexcept { return id_; }

  void listen(int backlog);
  // Asks `gate` (lib/net/peer_gate) about every request get_request() takes from now on.
  void admit_through(std::shared_ptr<PeerGate> gate) { gate_ = std::move(gate); }
  // The next request the gate admits (one it refuses is rejected with the reason).
  SyncEndpoint get_request(const Bounds& bounds);
  void connect(const Bounds& bounds);
  void accept(const Bounds& bounds);
  // Sends DREQ and waits (bounded) for DISCONNECTED; never throws.
  void disconnect(const Bounds& bounds) noexcept;

  // The next completion; throws CompletionError on an error status, RunStopped on timeout/Ctrl-C.
  ibv_wc send_completion(const Bounds& bounds);
  ibv_wc recv_completion(const Bounds& bounds);

  // The connected QP's RNR NAK timer (IB encoding), as set once connected.
  unsigned rnr_nak_timer() const;
  // Largest inline send the QP accepts (ibv_query_qp), 0 when it cannot tell.
  std::uint32_t max_inline_data() const;

 private:
  void make_nonblocking();
  // After a synchronous call answered EAGAIN: the CM event it was waiting for.
  void finish_cm_call(const char* call, const Bounds& bounds);
  // `result` of a synchronous call: done, failed (throws), or still under way (waits).
  void complete_cm_call(const char* call, int result, const Bounds& bounds);

  rdma_cm_id* id_ = nullptr;
  // Where the id is in rdma_cm(7)'s flow; every event read goes through cm_transition.
  CmState state_ = CmState::idle;
  std::shared_ptr<PeerGate> gate_;  // a listener's
  PeerGate::Slot gate_slot_;        // a request's: one of the listener's --max-clients
};

class MessageRegion {
 public:
  MessageRegion(rdma_cm_id* id, void* address, std::size_t length);  // rdma_reg_msgs
  ~MessageRegion();
  MessageRegion(const MessageRegion&) = delete;
  MessageRegion& operator=(const MessageRegion&) = delete;
  ibv_mr* get() const noexcept { return mr_; }

 private:
  ibv_mr* mr_;
};

// QP attributes of rdma_server/rdma_client: one send and one receive of one SGE, signalled
// sends, and room to send a whole message inline when the device allows it.
ibv_qp_init_attr message_qp_attributes(std::uint32_t inline_bytes);

// rdma_create_ep for a message endpoint; when the device refuses `inline_bytes` of inline
// data it retries without, so sends then come from registered memory. On return
// `attributes` holds what the QP got.
SyncEndpoint create_message_endpoint(const AddrInfo& info, std::uint32_t inline_bytes, ibv_qp_init_attr& attributes);

[[noreturn]] void throw_post_error(const char* call);

// A fixed-size send and receive buffer pair on a SyncEndpoint, registered with rdma_reg_msgs
// (the send buffer only when the QP cannot send it inline).
template <std::size_t Size>
class MessageBuffers {
 public:
  MessageBuffers(SyncEndpoint& endpoint, bool send_inline)
      : endpoint_(endpoint), send_inline_(send_inline), recv_region_(endpoint.get(), recv_.data(), Size) {
    if (!send_inline_) send_region_.emplace(endpoint.get(), send_.data(), Size);
  }
  std::array<std::uint8_t, Size>& send_buffer() { return send_; }
  const std::array<std::uint8_t, Size>& received() const { return recv_; }
  bool sends_inline() const { return send_inline_; }

  void post_recv() {
    if (rdma_post_recv(endpoint_.get(), nullptr, recv_.data(), Size, recv_region_.get()) != 0) {
      throw_post_error("rdma_post_recv");
    }
  }
  void post_send() {
    if (rdma_post_send(endpoint_.get(), nullptr, send_.data(), Size, send_inline_ ? nullptr : send_region_->get(),
                       send_inline_ ? IBV_SEND_INLINE : 0) != 0) {
      throw_post_error("rdma_post_send");
    }
  }

 private:
  std::array<std::uint8_t, Size> send_{};
  std::array<std::uint8_t, Size> recv_{};
  SyncEndpoint& endpoint_;
  bool send_inline_;
  MessageRegion recv_region_;
  std::optional<MessageRegion> send_region_;
};

}  // namespace rdmakit
