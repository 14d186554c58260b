#pragma once
// RAII over librdmacm: event channel, cm_id, events (acked on destruction), addresses,
// and a bounded wait for the next CM event.

#include <sys/socket.h>

#include <rdma/rdma_cma.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "lib/base/error.hpp"
#include "lib/base/wait.hpp"
#include "lib/net/peer_gate.hpp"
#include "lib/rdma/cm_flow.hpp"

namespace rdmakit {

struct SocketAddress {
  sockaddr_storage storage{};

  sockaddr* get() { return reinterpret_cast<sockaddr*>(&storage); }
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
  int family() const { return storage.ss_family; }
  std::uint16_t port() const;
  void set_port(std::uint16_t port);
  std::string to_string() const;    // "10.0.0.1:7174", "[fe80::1]:7174"
  std::string host_string() const;  // without the port
};

// Resolves a numeric address or host name. Throws UsageError when the host names nothing,
// std::runtime_error when the resolver itself failed (EAI_AGAIN: the run may work later).
SocketAddress parse_address(const std::string& host, std::uint16_t port);

// For a tool's validate step, before anything needs an RDMA device: throws UsageError when
// `host` names nothing for getaddrinfo with `family` (AF_UNSPEC, AF_INET, AF_INET6) and, with
// `numeric`, AI_NUMERICHOST. Returns false when the resolver failed instead: the lookup the
// run makes then reports that as the run's failure. An empty host is true.
bool check_resolvable(const std::string& host, int family = AF_UNSPEC, bool numeric = false);

// Throws what getaddrinfo's (or rdma_getaddrinfo's) EAI_* `code` for `host` means, as
// parse_address does.
[[noreturn]] void throw_unresolved(const std::string& host, int code);

// A name under .invalid (RFC 6761 reserves it for names that never resolve).
bool reserved_invalid_name(const std::string& host);

SocketAddress address_of(const sockaddr* address);

class EventChannel {
 public:
  EventChannel();  // throws RdmaError("rdma_create_event_channel", ...)
  ~EventChannel();
  EventChannel(const EventChannel&) = delete;
  EventChannel& operator=(const EventChannel&) = delete;

  rdma_event_channel* get() const noexcept { return channel_; }
  int fd() const noexcept { return channel_->fd; }

 private:
  rdma_event_channel* channel_ = nullptr;
};

// Owns an rdma_cm_id and the QP librdmacm makes on it: the one way a QP is made on a cm_id.
// The QP goes before the id; an owner of the QP's CQ and PD calls destroy_qp() before they go.
class CmId {
 public:
  CmId() = default;
  CmId(EventChannel& channel, rdma_port_space port_space);
  explicit CmId(rdma_cm_id* adopted) noexcept : id_(adopted) {}
  ~CmId();
  CmId(CmId&& other) noexcept : id_(std::exchange(other.id_, nullptr)) {}
  CmId& operator=(CmId&& other) noexcept;
  CmId(const CmId&) = delete;
  CmId& operator=(const CmId&) = delete;

  rdma_cm_id* get() const noexcept { return id_; }
  rdma_cm_id* operator->() const noexcept { return id_; }

  // Makes the id's QP on `pd` with `attributes` (rdma_create_qp, which fills in what the
  // provider granted), or with `create_flags` (IBV_QP_CREATE_*) through rdma_create_qp_ex.
  // Throws RdmaError naming the call and `device`.
  void create_qp(ibv_pd* pd, ibv_qp_init_attr& attributes, const std::string& device, std::uint32_t create_flags = 0);
  // Destroys the id's QP, if it has one.
  void destroy_qp() noexcept;

 private:
  rdma_cm_id* id_ = nullptr;
};

struct CmEventAck {
  void operator()(rdma_cm_event* event) const noexcept;
};
using CmEventPtr = std::unique_ptr<rdma_cm_event, CmEventAck>;

CmEvent classify(rdma_cm_event_type type);

// Feeds one event to the transition table (lib/rdma/cm_flow.hpp) and moves `state` on: the
// one way every holder of a cm_id follows rdma_cm(7)'s flow. Logs the step at debug level.
CmTransition advance(CmState& state, const rdma_cm_event& event);

// What a connect or accept offers the peer. RC and UC connections retry transport errors
// and receiver-not-ready 7 times each (for RNR, 7 means without limit: a peer that posts
// its receives late is waited for, as the stock tools do); a datagram exchange has neither.
struct ConnectOffer {
  std::span<const std::uint8_t> private_data;  // at most 56 (RC connect) / 196 (accept) bytes
  std::uint8_t responder_resources = 1;        // incoming RDMA READs allowed in flight
  std::uint8_t initiator_depth = 1;            // outgoing RDMA READs kept in flight
  std::optional<std::uint32_t> qp_num;         // a QP that rdma_create_qp did not make, or a UD QP
  bool datagram = false;
  std::uint8_t retry_count = 7;  // transport retries before a send fails (0-7)
};
rdma_conn_param connection_parameters(const ConnectOffer& offer);

// The largest datagram a UD QP on the id's port may send (bytes): the port's active MTU, and
// no more than the path record's MTU where route resolution gave one (on InfiniBand a switch
// between the hosts may take less than the port). The passive side of a SIDR exchange has no
// path record: the port's MTU alone. Throws RdmaError when the port cannot be queried.
std::uint32_t datagram_mtu(rdma_cm_id* id);
// The same from the two MTUs (IB enums; path 0 when none): what the rule is, for tests.
std::uint32_t datagram_mtu(ibv_mtu port_active, int path);

// The error a failure event reports for the asynchronous `call` it completes, read as
// librdmacm's own synchronous calls read it: REJECTED is ECONNREFUSED (its status is the IB
// CM reject reason, not an errno), any other nonzero status is the errno (negated when
// negative). A failure event with status 0 carries no errno; the error names the event.
RdmaError event_failure(const rdma_cm_event& event, const char* call, std::string subject, std::string address = {});

// The next event on `channel`. Throws RunStopped on deadline or when `stop_fd` fires.
// The raw-channel forms serve ids whose channel librdmacm made (rdma_create_ep).
CmEventPtr next_cm_event(EventChannel& channel, Clock::time_point deadline, int stop_fd, const std::string& awaiting);
CmEventPtr next_cm_event(rdma_event_channel* channel, Clock::time_point deadline, int stop_fd,
                         const std::string& awaiting);

// Reads one event if one is already queued (channel must be non-blocking).
// The gate of an rdma_cm listener (lib/net/peer_gate): admits the requesting peer of `id`,
// or rejects the request with the reason in its private data (send_bw's Refusal, which
// every client of ours prints) and returns nullopt; the caller then destroys `id`.
std::optional<PeerGate::Slot> admit_request(PeerGate& gate, rdma_cm_id* id);
// The reason a server of ours gave in a REJECTED's private data, if any.
std::optional<std::string> refusal_reason(const rdma_cm_event& event);
// ": the server refused: REASON" with that reason, "" without one: what every client of ours
// adds to the peer its error names, spelled once.
std::string refused_by_server(const rdma_cm_event& event);

CmEventPtr poll_cm_event(EventChannel& channel);
CmEventPtr poll_cm_event(rdma_event_channel* channel);

}  // namespace rdmakit
