#pragma once
// One reliable-connected RDMA endpoint: its own CM event channel and cm_id, PD, CQ with a
// completion channel, QP and registered buffers, torn down in the right order. Every wait
// is bounded by the timeout and cut short by the stop signal or the peer disconnecting.
// With `datagram`, the same over rdma_cm's UDP port space: a UD QP, connect() and accept()
// are the SIDR exchange (no disconnect), and the active side learns the peer's address
// handle, QP number and Q_Key (datagram_peer()).
//
// Active side:  Endpoint::resolve() -> register buffers, post receives -> connect()
// Passive side: Listener::next_request() -> register buffers, post receives -> accept()

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "lib/base/step.hpp"
#include "lib/base/wait.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/rdma/cq_waiter.hpp"
#include "lib/rdma/device_caps.hpp"
#include "lib/rdma/verbs.hpp"

namespace rdmakit {

struct EndpointOptions {
  std::uint32_t send_depth = 16;
  std::uint32_t recv_depth = 2;
  std::uint8_t responder_resources = 1;  // incoming RDMA READs we allow in flight
  std::uint8_t initiator_depth = 1;      // outgoing RDMA READs we keep in flight
  std::optional<std::uint8_t> type_of_service;
  // The local ACK timeout, 4.096 us * 2^N (RDMA_OPTION_ID_ACK_TIMEOUT); none: rdma_cm's from
  // the path.
  std::optional<std::uint8_t> ack_timeout;
  std::uint8_t retry_count = 7;       // transport retries before a send fails, asked for in the CM exchange
  bool self_managed_qp = false;       // create the QP with ibv_create_qp and drive its states here
  bool datagram = false;              // RDMA_PS_UDP and a UD QP (not with self_managed_qp)
  std::uint32_t max_inline_data = 0;  // asked for; the most the device grants where it refuses that
  BufferMemory buffer_memory = BufferMemory::heap;  // where add_buffer() takes its memory
  // Self-managed QPs only: the path MTU set at RTR instead of the route's.
  std::optional<ibv_mtu> path_mtu;
  // Sent in rdma_connect (active) or rdma_accept (passive): at most 56 / 196 bytes.
  std::vector<std::uint8_t> private_data;
  // Called with the device the address resolved to, before any resource is made on it:
  // the place to refuse what the device cannot do (throw UsageError).
  std::function<void(ibv_context*, std::uint8_t port)> check_device;
  // Active side: called with the private data of a REJECTED before the generic
  // "rejected" error is thrown; may throw a better one (a reason the server gave).
  std::function<void(std::span<const std::uint8_t>)> explain_rejection;
  RunLimits limits;  // every wait: the silence bound and the stop signal
};

class Endpoint {
 public:
  // Resolves address and route to `destination` (from `source` when given), telling `steps`
  // of the resolve_addr and resolve_route steps, and creates the verbs resources.
  static std::unique_ptr<Endpoint> resolve(const SocketAddress* source, const SocketAddress& destination,
                                           const EndpointOptions& options, const StepEvents& steps);

  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  void connect(const StepEvents& steps);  // tells of the connect step
  void accept(const StepEvents& steps);   // tells of the accept step
  // Passive side, instead of accept(): turns the request down, `private_data` saying why.
  void reject(std::span<const std::uint8_t> private_data) noexcept;

  // The buffer lives as long as the endpoint and is deregistered before the PD goes.
  RegisteredBuffer& add_buffer(std::size_t size, int access);

  // Signalled requests; `wr_id` is the caller's id, kept modulo 2^32 as the sequence of the
  // id scheme (lib/rdma/work_id.hpp) and given back as next_completion()'s wr_id.
  void post_receive(const RegisteredBuffer& buffer, std::size_t length, std::uint64_t wr_id);
  void post_send(const RegisteredBuffer& buffer, std::size_t length, std::uint64_t wr_id);
  void post_rdma(ibv_wr_opcode opcode, const RegisteredBuffer& local, std::size_t length, std::uint64_t remote_address,
                 std::uint32_t rkey, std::uint64_t wr_id);

  // The next successful work completion. Throws CompletionError for an error status,
  // RunStopped for timeout, Ctrl-C or peer disconnect.
  ibv_wc next_completion();

  // Disconnects and waits (bounded) for the DISCONNECTED event so the peer sees a clean end.
  void disconnect() noexcept;

  std::string local_address() const;
  std::string peer_address() const;
  CmState state() const noexcept { return state_; }
  // What the peer sent with its connection request (passive) or its accept (active).
  const std::vector<std::uint8_t>& peer_private_data() const noexcept { return peer_private_data_; }
  // Sets what accept() sends, once the request's private data has been read.
  void set_private_data(std::vector<std::uint8_t> data) { options_.private_data = std::move(data); }
  // Passive side, before accept(): the path MTU the client asked for (self-managed QPs).
  void set_path_mtu(std::optional<ibv_mtu> mtu) { options_.path_mtu = mtu; }
  // The GID table index and path MTU the connected QP uses (RoCE/GRH; nullopt without a GRH).
  std::optional<std::uint8_t> source_gid_index() const;
  ibv_mtu active_path_mtu() const;
  // A datagram endpoint's largest message: the port's MTU, within the path record's (cm.hpp).
  std::uint32_t datagram_mtu() const;
  // What the connected QP ended up with, as ibv_query_qp says.
  struct Transport {
    std::uint8_t traffic_class = 0;  // the GRH's (RoCE: the IP TOS)
    std::uint8_t service_level = 0;
    std::uint8_t ack_timeout = 0;
    std::uint8_t retry_count = 0;
    std::uint8_t rnr_retry = 0;
    std::uint8_t rnr_nak_timer = 0;  // what our RNR NAKs tell the peer to wait (IB encoding)
  };
  Transport transport() const;
  // Datagram endpoints, active side once connected: where its sends go.
  struct DatagramPeer {
    ibv_ah* ah = nullptr;
    std::uint32_t qp_num = 0;
    std::uint32_t qkey = 0;
  };
  std::optional<DatagramPeer> datagram_peer() const;
  // For loops that post and poll themselves (benchmarks); the endpoint keeps ownership.
  ibv_qp* queue_pair() const { return qp(); }
  ibv_cq* completion_queue() const { return cq_->get(); }
  ibv_pd* protection_domain() const { return pd_->get(); }
  ibv_context* context() const { return id_->verbs; }
  std::uint8_t port_num() const { return id_->port_num; }
  std::uint32_t max_inline_data() const noexcept { return max_inline_data_; }
  // What the endpoint's device and port can do (read when its resources were made).
  const DeviceCaps& caps() const noexcept { return caps_; }
  // Non-blocking: applies queued CM events; true while the connection is up.
  bool poll_connected();
  // The CM event channel's descriptor, readable while events wait for poll_connected(): for
  // a loop that sleeps until the connection changes (send_bw's -e loops).
  int cm_fd() const noexcept { return channel_->fd(); }

 private:
  friend class Listener;
  Endpoint(std::unique_ptr<EventChannel> channel, CmId id, const EndpointOptions& options, CmState state);
  void create_resources();
  // The CM's read depths within what the device allows: librdmacm refuses more (EINVAL).
  void fit_reads_to_device();
  // Reads CM events until one calls for `wanted`; a failure event becomes the RdmaError of
  // `call` on `target` (event_failure), naming `host` for hints and --diagnose.
  void await_action(CmAction wanted, const char* call, const std::string& target, const std::string& host,
                    const std::string& awaiting);
  void move_qp_to(ibv_qp_state target);
  void ready_own_qp();
  void flush_own_qp() noexcept;
  void await_established(const StepTimer& timer, const StepEvents& steps);
  [[noreturn]] void fail_establishment(const rdma_cm_event& event, const CmTransition& transition, Step step);
  void take_reply(const rdma_cm_event& event);
  // Applies one CM event; returns the transition taken.
  CmTransition apply(const rdma_cm_event& event);
  // next_completion()'s parts: one completion if the CQ holds one (an error one throws),
  // and the queued CM events (throwing RunStopped when the peer has gone).
  std::optional<ibv_wc> poll_completion();
  void apply_cm_events();
  rdma_conn_param connection_parameters() const;
  void set_ack_timeout();
  ibv_qp* qp() const;
  Clock::time_point deadline() const { return Clock::now() + options_.limits.timeout; }

  // Declaration order is teardown order reversed: buffers and QP go first, the id last.
  std::unique_ptr<EventChannel> channel_;
  CmId id_;
  EndpointOptions options_;
  CmState state_;
  std::unique_ptr<ProtectionDomain> pd_;
  std::unique_ptr<CompletionChannel> completion_channel_;
  std::unique_ptr<CompletionQueue> cq_;
  std::unique_ptr<QueuePair> own_qp_;
  std::vector<std::unique_ptr<RegisteredBuffer>> buffers_;
  std::unique_ptr<AddressHandle> peer_ah_;  // datagram, active side
  std::uint32_t peer_qp_num_ = 0;
  std::uint32_t peer_qkey_ = 0;
  std::unique_ptr<CqWaiter> waiter_;  // next_completion()'s sleep: the CQ, the CM channel, the stop signal
  bool disconnect_sent_ = false;      // our DREQ or DREP went out: rdma_disconnect once only
  std::vector<std::uint8_t> peer_private_data_;
  std::uint32_t max_inline_data_ = 0;
  DeviceCaps caps_;
  PeerGate::Slot gate_slot_;  // passive side: one of the listener's --max-clients while this lives
};

class Listener {
 public:
  // Binds to `address` (port included) and listens. Throws RdmaError (rdma_bind_addr, ...).
  Listener(const SocketAddress& address, int backlog, const EndpointOptions& options);

  // Waits for the next connection request (forever when `deadline` is empty), moves it to
  // an endpoint with its own event channel, and creates its resources. With a gate, a
  // request the gate refuses is rejected with the reason and the wait goes on.
  std::unique_ptr<Endpoint> next_request(std::optional<Clock::time_point> deadline);
  // Asks `gate` (lib/net/peer_gate) about every request from now on.
  void admit_through(std::shared_ptr<PeerGate> gate) { gate_ = std::move(gate); }

  std::string local_address() const;

 private:
  EventChannel channel_;
  CmId id_;
  EndpointOptions options_;
  std::shared_ptr<PeerGate> gate_;
};

}  // namespace rdmakit
