#pragma once
// Many connections (or multicast joins) driven concurrently through one CM event channel
// and one completion channel: the loop udaddy, ucmatose and mckey share. Each connection
// owns its cm_id, PD, CQ, QP, message buffer and (for datagrams) address handle, records
// when each of its CM steps started and ended, and counts what it sent and received.
// Every wait is bounded by the timeout since the last progress, Ctrl-C and peer loss.
//
// Active side:  connect(target) -> exchange(...) -> disconnect() or await_disconnect()
// Passive side: listen(address) -> accept() -> exchange(...) -> ...
// Multicast:    join(source, group) -> exchange(...) -> leave()

#include <rdma/rdma_cma.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/report.hpp"
#include "lib/base/stats.hpp"
#include "lib/base/wait.hpp"
#include "lib/net/peer_gate.hpp"
#include "lib/rdma/addressing.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/rdma/cq_waiter.hpp"
#include "lib/rdma/verbs.hpp"

namespace rdmakit {

struct GroupOptions {
  rdma_port_space port_space = RDMA_PS_TCP;  // TCP and IB give RC QPs; UDP and IPOIB give UD QPs
  std::size_t connections = 1;
  std::uint32_t message_count = 10;  // receives posted (and sends made) per connection
  std::uint32_t message_size = 100;
  std::optional<std::uint8_t> type_of_service;
  std::optional<std::uint8_t> ack_timeout;
  bool post_receives = true;    // false for a multicast sender
  bool send_only_join = false;  // multicast: join as a send-only full member
  bool block_loopback = false;  // multicast: do not receive our own datagrams
  RunLimits limits;             // bounds every silence (no CM event, no completion); the stop signal
  // Bounds for the first thing a passive side waits for (unset: `limits.timeout`; zero:
  // forever, like a server waiting for its clients); once it arrives, the timeout applies again.
  std::optional<std::chrono::milliseconds> accept_timeout;
  std::optional<std::chrono::milliseconds> first_message_timeout;
  // Passive side: who may connect (lib/net/peer_gate); a refused request is rejected with
  // the reason and does not count towards `connections`.
  std::shared_ptr<PeerGate> gate;
};

class Connection {
 public:
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  std::size_t index() const noexcept { return index_; }
  CmState state() const noexcept { return state_; }
  std::uint64_t sends_completed() const noexcept { return sends_completed_; }
  std::uint64_t received() const noexcept { return received_; }
  std::uint64_t receives_expected() const noexcept { return receives_expected_; }
  std::uint64_t sends_expected() const noexcept { return sends_expected_; }
  std::optional<Clock::time_point> ready_at() const noexcept { return ready_at_; }
  const std::vector<StepSpan>& steps() const noexcept { return steps_; }
  // Why this connection ended early, if it did; the rest of the group went on without it.
  const std::optional<RdmaError>& failure() const noexcept { return failure_; }
  // The step under way when the run ended inside one.
  const std::optional<StepTimer>& current_step() const noexcept { return current_; }
  rdma_cm_id* cm_id() const noexcept { return id_.get(); }
  std::uint32_t remote_qpn() const noexcept { return remote_qpn_; }  // 0 until known
  std::optional<unsigned> rnr_nak_timer() const noexcept { return rnr_nak_timer_; }

 private:
  friend class ConnectionGroup;
  Connection(std::size_t index, CmId id);
  void begin(Step step);
  void end_step(bool failed = false);

  std::size_t index_;
  // Declaration order is teardown order reversed; the QP goes first, in ~Connection.
  CmId id_;
  std::unique_ptr<ProtectionDomain> pd_;
  std::unique_ptr<CompletionQueue> cq_;
  std::unique_ptr<RegisteredBuffer> buffer_;  // [send slot][receive slot] * message_count
  std::unique_ptr<AddressHandle> ah_;
  std::uint32_t remote_qpn_ = 0;
  std::uint32_t remote_qkey_ = 0;
  std::optional<unsigned> rnr_nak_timer_;  // connected (RC) QPs, once established
  CmState state_ = CmState::idle;
  bool disconnecting_ = false;  // we called rdma_disconnect (or answered the peer's)
  std::vector<StepSpan> steps_;
  std::optional<StepTimer> current_;
  std::optional<Clock::time_point> ready_at_;
  std::optional<RdmaError> failure_;
  std::uint64_t sends_posted_ = 0;
  std::uint64_t sends_completed_ = 0;
  std::uint64_t received_ = 0;
  std::uint64_t receives_expected_ = 0;
  std::uint64_t sends_expected_ = 0;
};

class ConnectionGroup {
 public:
  explicit ConnectionGroup(GroupOptions options);
  ~ConnectionGroup();
  ConnectionGroup(const ConnectionGroup&) = delete;
  ConnectionGroup& operator=(const ConnectionGroup&) = delete;

  // Setup (connect, accept, join) returns when every connection is ready or has failed. A
  // call that fails for one connection ends that connection alone: its step is recorded
  // as failed, its error kept for the report (which then fails the run), and the others go
  // on. Only when none became ready does the first failure throw, as RdmaError.

  // Active side: one cm_id per connection, all resolving at once.
  void connect(const rdma_addrinfo& target);

  // Passive side: bind and listen, then wait until `connections` requests are accepted
  // and ready (RC: ESTABLISHED; UD: accepted) or failed. Extra requests are rejected.
  void listen(const sockaddr* address);
  void accept();

  // Multicast: every connection resolves and joins `group` (bound to `source` if given).
  void join(const sockaddr* source, const sockaddr* group);
  void leave() noexcept;

  // Posts `sends_each` sends on every ready connection and waits until each has completed
  // them and has received `receives_total_each` messages in all (counting any that arrived
  // before this call). A UD passive side answers to the address and QP number its first
  // datagram carried.
  void exchange(Step step, std::uint64_t sends_each, std::uint64_t receives_total_each, const std::string& awaiting);

  // Disconnects every connection and waits for each DISCONNECTED.
  void disconnect();
  // Waits for the peer to disconnect every connection, answering each.
  void await_disconnect();
  // Moves every cm_id to a fresh event channel (rdma_migrate_id).
  void migrate();

  std::string local_address() const;
  std::string target() const { return target_; }
  const std::vector<std::unique_ptr<Connection>>& connections() const { return connections_; }
  const GroupOptions& options() const { return options_; }
  // The CM events a report lists (errors, rejections, address changes), as JSON objects.
  const nlohmann::json& events() const { return events_; }

 private:
  using Predicate = std::function<bool()>;
  // Handles CM events and completions until `done`; throws RunStopped when nothing happens
  // until `initial_deadline` (default: the timeout from now) or for `timeout` after that.
  void pump(const Predicate& done, const std::string& awaiting,
            std::optional<Clock::time_point> initial_deadline = std::nullopt);
  void handle(rdma_cm_event& event);
  void act(Connection& connection, const CmTransition& transition, CmState before, rdma_cm_event& event);
  void on_connect_request(rdma_cm_event& event);
  void accept_request(Connection& connection);
  // Ends `connection` alone with `error` (see connect()).
  void fail(Connection& connection, const RdmaError& error);
  bool all_settled() const;
  // After setup: throws the first failure when no connection became ready.
  void require_one_ready() const;
  void start_join(Connection& connection);
  void on_ready(Connection& connection, const rdma_cm_event& event) const;
  void create_resources(Connection& connection);
  void create_qp(Connection& connection, ibv_qp_init_attr& attributes) const;
  void post_receives(Connection& connection);
  void post_sends(Connection& connection, std::uint64_t count);
  bool drain_completions();
  void on_completion(const ibv_wc& completion);
  static void answer_first_datagram(Connection& connection, const ibv_wc& completion, const std::byte* slot);
  // exchange()'s parts: whether every connection in `active` got its target (throwing when
  // one lost its peer first), and the timeout that says how many fell short.
  static bool exchanged(const std::vector<Connection*>& active, const std::vector<std::uint64_t>& targets);
  [[noreturn]] static void throw_short(const RunStopped& stopped, const std::vector<Connection*>& active,
                                       const std::vector<std::uint64_t>& targets);
  void set_id_options(Connection& connection, bool active);
  std::unique_ptr<Connection>& add_connection(CmId id);
  void keep_rejected(const rdma_cm_event& event, const char* why);
  std::size_t receive_slot_bytes() const;

  GroupOptions options_;
  // Declaration order is teardown order reversed: connections, then channels.
  std::unique_ptr<EventChannel> channel_;
  CmId listen_id_;
  std::unique_ptr<CompletionChannel> completion_channel_;
  // pump()'s sleep: every connection's CQ, the CM event channel and the stop signal at once.
  CqWaiter waiter_{CompletionMode::events, options_.limits.stop_fd};
  ibv_context* context_ = nullptr;
  std::vector<std::unique_ptr<Connection>> connections_;
  // The last rejected request's id, kept until its event is acked (keep_rejected).
  std::vector<CmId> rejected_;
  std::size_t rejected_requests_ = 0;
  static constexpr std::size_t max_rejections_listed = 32;
  std::vector<PeerGate::Slot> gate_slots_;  // the admitted requests'; the group's -c is their cap
  std::string target_;                      // address:port (or group) shown in messages
  std::string target_host_;                 // its bare host, for hints and --diagnose
  int target_family_ = AF_UNSPEC;
  SocketAddress group_;
  bool joined_ = false;
  std::vector<std::uint8_t> private_data_;
  nlohmann::json events_ = nlohmann::json::array();
  std::optional<RdmaError> first_failure_;
};

}  // namespace rdmakit
