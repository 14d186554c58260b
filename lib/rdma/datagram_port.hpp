#pragma once
// One unreliable-datagram QP on rdma_cm's UDP port space that both answers and sends, as
// rdma_pingmesh needs it: bound to one address and port, it hands its QP number to every
// peer whose SIDR request its admission rule lets in (the others are rejected with the
// reason), and it resolves peers of its own, each with a SIDR exchange of a short-lived
// cm_id, into an address handle, QP number and Q_Key to send to. Datagrams are small (a slot
// each); the caller sleeps on the waiter and drains what arrived. Where the device stamps
// completions (ibv_query_device_ex: a completion timestamp mask and a core clock), its CQ is
// an extended one and every completion is handed on with its stamp.

#include <infiniband/verbs.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "lib/base/wait.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/rdma/completion_clock.hpp"
#include "lib/rdma/cq_waiter.hpp"
#include "lib/rdma/verbs.hpp"
#include "lib/rdma/work_id.hpp"
#include "lib/rdma/work_request.hpp"

namespace rdmakit {

struct DatagramPortOptions {
  std::string bind_address;  // an address on an RDMA netdev (a wildcard has no device)
  std::uint16_t port = 0;
  std::size_t receive_slots = 512;
  std::size_t send_slots = 256;
  std::uint32_t message_bytes = 64;  // the largest datagram sent or taken
  std::chrono::milliseconds resolve_timeout{3000};
  int stop_fd = -1;
  int wake_fd = -1;  // another descriptor whose readiness ends a sleep (the reload signal)
  // Where the device does not stamp completions, stamp them with the host's clock when they
  // are polled: what uses the stamps then runs, and is tested, on any device.
  bool host_stamps = false;
};

// Whose clock stamps the completions.
enum class StampSource : std::uint8_t {
  none,    // nobody's: the device has no completion timestamps
  device,  // the device's (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
  host,    // the host's when polled (DatagramPortOptions::host_stamps)
};

// The way back to a datagram's sender, kept past its arrival (the receive slot is reused).
struct ReplyRoute {
  std::string source;
  std::uint32_t source_qp = 0;
  ibv_wc completion{};
  ibv_grh grh{};
};

// One datagram that arrived: its bytes (after the GRH), where it came from, and when it was
// taken off the CQ (the software receive time, CLOCK_MONOTONIC ns).
struct DatagramArrival {
  std::span<const std::uint8_t> bytes;
  // The sender's address: from the GRH's source GID, or, where none came (InfiniBand inside
  // a subnet), the resolved peer whose LID and QP number sent it; "" when neither says.
  std::string source;
  std::uint32_t source_qp = 0;
  std::uint64_t received_ns = 0;
  std::optional<std::uint64_t> completion_stamp;  // on the port's completion clock
  const ibv_wc* completion = nullptr;
  const ibv_grh* grh = nullptr;

  ReplyRoute route() const {
    return {.source = source, .source_qp = source_qp, .completion = *completion, .grh = *grh};
  }
};

// A SIDR exchange's outcome for the resolve() call that asked for `key`.
struct Resolution {
  std::string key;
  std::optional<DatagramAddress> address;  // none: failed, `error` says why
  std::string error;
};

// CLOCK_MONOTONIC in nanoseconds: the time every probe and answer carries.
std::uint64_t monotonic_ns();

// The sender's IP address from the 40 bytes in front of a UD datagram: the IPv4 header of
// RoCE v2 over IPv4 (in its last 20 bytes), else the GRH's source GID (IPv4-mapped: dotted
// quad); "" when neither.
std::string grh_source_address(std::span<const std::uint8_t, grh_bytes> header);

class DatagramPort {
 public:
  // Binds, listens and sets up the PD, CQ, QP (INIT, RTR, RTS with rdma_cm's Q_Key) and the
  // receives. Throws RdmaError naming the failing call (rdma_bind_addr's ENODEV with the
  // diag-bind hint).
  explicit DatagramPort(DatagramPortOptions options);
  ~DatagramPort();
  DatagramPort(const DatagramPort&) = delete;
  DatagramPort& operator=(const DatagramPort&) = delete;

  // Starts a SIDR exchange with `address` at this port's port number; its Resolution comes
  // out of take_cm_events, under `key`. A key already resolving is left to finish.
  void resolve(const std::string& key, const std::string& address);
  bool resolving(const std::string& key) const { return pending_.contains(key); }
  bool resolving_any() const { return !pending_.empty(); }

  // Every CM event queued: peers' SIDR requests (accepted when `admit(source address)` says
  // so, else rejected with its reason) and the ends of our own exchanges, returned. Pending
  // exchanges past the resolve timeout end as failed. `refused` counts rejected requests.
  using Admission = std::function<std::optional<std::string>(const std::string& source)>;
  std::vector<Resolution> take_cm_events(const Admission& admit, std::uint64_t& refused);

  // Sends `bytes` (at most message_bytes) to `to`; false when every send slot is in flight.
  // A `tag` other than 0 comes back to drain's `on_sent` when the send has completed.
  bool send(std::span<const std::uint8_t> bytes, const DatagramAddress& to, std::uint64_t tag = 0);
  // Takes the CQ's completions: each datagram that arrived goes to `on_arrival`, then its
  // slot takes a receive again; each tagged send that completed goes to `on_sent` with its
  // stamp (none when it failed or nobody stamps). A datagram that failed is counted
  // (failed()), and a QP that an error stopped is made ready again (recoveries()). Returns
  // how many completions there were.
  using ArrivalHandler = std::function<void(const DatagramArrival&)>;
  using SentHandler = std::function<void(std::uint64_t tag, std::optional<std::uint64_t> completion_stamp)>;
  std::size_t drain(const ArrivalHandler& on_arrival, const SentHandler& on_sent = {});
  // The way back to a datagram's sender: the resolved peer's own address handle for one
  // that came without a GRH (IB inside a subnet), else one made from the completion once
  // per source and QP, and kept.
  DatagramAddress reply_to(const ReplyRoute& route);

  // Sleeps until a completion, a CM event, the stop signal or `until`; arms first, and
  // returns completion without sleeping when one arrived in between.
  Woken sleep(Clock::time_point until);

  std::uint64_t failed() const { return failed_; }
  std::uint64_t recoveries() const { return recoveries_; }
  std::string local_address() const { return local_.host_string(); }
  std::uint32_t qp_num() const { return qp_->get()->qp_num; }
  ibv_context* context() const { return listen_id_->verbs; }
  StampSource stamp_source() const { return stamp_source_; }
  // The clock of the completions' stamps; none when nobody stamps.
  std::optional<CompletionClock> completion_clock() const { return completion_clock_; }

 private:
  // A peer this port resolved: the key its resolve() was given, and its address.
  struct ResolvedSender {
    std::string key;
    std::string address;
  };
  // An exchange under way. Its id goes only after the loop that took its last event has
  // acknowledged it (rdma_destroy_id waits for that): `outcome` holds the end till then.
  struct Pending {
    CmId id;
    Clock::time_point deadline;
    std::string address;
    std::optional<Resolution> outcome;
  };
  void ready_qp();
  void post_receive(std::uint32_t slot);
  void accept_request(rdma_cm_event& event, const Admission& admit, std::uint64_t& refused) const;
  void advance_exchange(rdma_cm_event& event);
  Resolution resolved(const std::string& key, const rdma_cm_event& event);
  // The resolved peer that sent a datagram without a GRH, none when it is none of them.
  const ResolvedSender* sender_without_grh(const ibv_wc& wc) const;
  // Its address, "" when none.
  std::string resolved_source(const ibv_wc& wc) const;
  void retire_unused_handles();
  void recover();
  // With `device_stamps`, a CQ whose completions carry the device's time where it has one.
  void make_cq(ibv_context* context, int depth, bool device_stamps);
  // A CQ that stamps completions with the device's clock, if the device has one: false and
  // no CQ where it has none or refuses.
  bool make_stamping_cq(ibv_context* context, int depth);
  void make_qp();
  int poll_batch();
  void take_completion(const ibv_wc& wc, std::uint64_t taken_ns, std::optional<std::uint64_t> stamp,
                       const ArrivalHandler& on_arrival, const SentHandler& on_sent);
  void take_failure(const ibv_wc& wc, WorkId id, const SentHandler& on_sent);

  DatagramPortOptions options_;
  std::uint32_t slot_bytes_;  // receive slot: GRH + message
  // Declaration order is teardown order reversed: the QP before its CQ and PD, the ids last.
  EventChannel channel_;
  CmId listen_id_;
  SocketAddress local_;
  std::map<std::string, Pending> pending_;
  std::unique_ptr<ProtectionDomain> pd_;
  std::unique_ptr<CompletionChannel> completion_channel_;
  std::unique_ptr<CompletionQueue> cq_;
  std::unique_ptr<QueuePair> qp_;
  std::unique_ptr<RegisteredBuffer> buffer_;  // [receive slots][send slots]
  std::vector<std::uint32_t> free_send_slots_;
  std::vector<std::uint64_t> send_tags_;  // by send slot
  std::uint32_t qkey_ = 0;
  std::uint8_t port_num_ = 1;
  StampSource stamp_source_ = StampSource::none;
  std::optional<CompletionClock> completion_clock_;
  bool wallclock_stamps_ = false;  // the provider's nanoseconds, not its raw counter
  std::uint32_t generation_ = 0;   // the QP's: work ids carry it in their owner field
  std::uint64_t failed_ = 0;
  std::uint64_t recoveries_ = 0;
  std::unique_ptr<CqWaiter> waiter_;
  // Address handles: ours to each resolved peer (by key) and the answers' (by source
  // address and QP). One a resolved peer replaces waits in `retired_` until no send is in flight.
  std::map<std::string, std::unique_ptr<AddressHandle>> resolved_handles_;
  // Who a datagram without a GRH came from: each resolved peer by the LID and QP number its
  // SIDR reply named (on IB the sender's LID is the completion's slid), and the LID and QP
  // of each key, so that a peer resolved anew (a new QP) replaces its entry.
  std::map<std::pair<std::uint16_t, std::uint32_t>, ResolvedSender> senders_by_lid_;
  std::map<std::string, std::pair<std::uint16_t, std::uint32_t>> lid_of_key_;
  std::map<std::pair<std::string, std::uint32_t>, std::unique_ptr<AddressHandle>> reply_handles_;
  std::vector<std::unique_ptr<AddressHandle>> retired_;
  std::vector<ibv_wc> completions_;
  std::vector<std::uint64_t> stamps_;  // completions_' stamps, where stamp_source_ is not none
};

}  // namespace rdmakit
