#include "lib/rdma/cm.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <strings.h>

#include <infiniband/ib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>

#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"
#include "lib/rdma/refusal.hpp"

namespace rdmakit {

std::uint16_t SocketAddress::port() const {
  if (family() == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  }
  return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
}

void SocketAddress::set_port(std::uint16_t port) {
  if (family() == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
  }
}

std::string SocketAddress::host_string() const {
  char text[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, text, sizeof text);
  } else if (family() == AF_IB) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_ib*>(&storage)->sib_addr, text, sizeof text);
  } else if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, text, sizeof text);
  } else {
    return "family " + std::to_string(family());
  }
  return text;
}

std::string SocketAddress::to_string() const {
  const auto host = host_string();
  if (family() == AF_IB) {
    return "gid " + host;
  }
  return family() == AF_INET6 ? "[" + host + "]:" + std::to_string(port()) : host + ":" + std::to_string(port());
}

bool reserved_invalid_name(const std::string& host) {
  std::string_view name = host;
  if (name.ends_with('.')) name.remove_suffix(1);
  constexpr std::string_view tld = "invalid";
  if (name.size() < tld.size()) return false;
  const auto label_at = name.size() - tld.size();
  return (label_at == 0 || name[label_at - 1] == '.') &&
         strncasecmp(name.data() + label_at, tld.data(), tld.size()) == 0;
}

namespace {

// Only answers about the name itself are the command line's fault; a resolver that cannot be
// reached or fails (EAI_AGAIN, EAI_FAIL) may well answer the same command later.
bool names_nothing(const std::string& host, int code) {
  if (code == EAI_NONAME || code == EAI_SERVICE || reserved_invalid_name(host)) return true;
#ifdef EAI_NODATA
  if (code == EAI_NODATA) return true;
#endif
#ifdef EAI_ADDRFAMILY
  if (code == EAI_ADDRFAMILY) return true;
#endif
  return false;
}

// getaddrinfo, except that a name under .invalid fails at once: RFC 6761 asks resolvers to
// answer those without asking DNS, which glibc does not do, and where no DNS server is
// reachable (the test VM) glibc would otherwise answer "try again" after its timeouts.
int resolve(const std::string& host, int family, bool numeric, addrinfo** found) {
  if (reserved_invalid_name(host)) return EAI_NONAME;
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  if (numeric) hints.ai_flags = AI_NUMERICHOST;
  return getaddrinfo(host.c_str(), nullptr, &hints, found);
}

}  // namespace

void throw_unresolved(const std::string& host, int code) {
  const int system_errno = errno;
  std::string message = "cannot resolve '" + host + "': " + gai_strerror(code);
  if (code == EAI_SYSTEM) message += std::string(": ") + std::strerror(system_errno);
  if (names_nothing(host, code)) {
    throw UsageError(message);
  }
  throw std::runtime_error(message);
}

SocketAddress parse_address(const std::string& host, std::uint16_t port) {
  addrinfo* found = nullptr;
  if (const int rc = resolve(host, AF_UNSPEC, false, &found); rc != 0) {
    throw_unresolved(host, rc);
  }
  SocketAddress address;
  std::memcpy(&address.storage, found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  address.set_port(port);
  return address;
}

bool check_resolvable(const std::string& host, int family, bool numeric) {
  if (host.empty()) return true;
  addrinfo* found = nullptr;
  if (const int rc = resolve(host, family, numeric, &found); rc != 0) {
    if (names_nothing(host, rc)) throw_unresolved(host, rc);
    return false;
  }
  freeaddrinfo(found);
  return true;
}

SocketAddress address_of(const sockaddr* address) {
  SocketAddress copy;
  if (address != nullptr) {
    const auto length = address->sa_family == AF_INET6 ? sizeof(sockaddr_in6)
                        : address->sa_family == AF_IB  ? sizeof(sockaddr_ib)
                                                       : sizeof(sockaddr_in);
    std::memcpy(&copy.storage, address, length);
  }
  return copy;
}

EventChannel::EventChannel() : channel_(rdma_create_event_channel()) {
  check_pointer(channel_, "rdma_create_event_channel", "");
  set_nonblocking(channel_->fd, "rdma event channel");
}

EventChannel::~EventChannel() {
  rdma_destroy_event_channel(channel_);
}

CmId::CmId(EventChannel& channel, rdma_port_space port_space) {
  check_errno(rdma_create_id(channel.get(), &id_, nullptr, port_space), "rdma_create_id", "");
}

CmId& CmId::operator=(CmId&& other) noexcept {
  if (this != &other) {
    CmId dying(std::move(*this));
    id_ = std::exchange(other.id_, nullptr);
  }
  return *this;
}

CmId::~CmId() {
  if (id_ == nullptr) {
    return;
  }
  destroy_qp();
  if (rdma_destroy_id(id_) != 0) {
    spdlog::warn("rdma_destroy_id: {}", std::strerror(errno));
  }
}

void CmId::create_qp(ibv_pd* pd, ibv_qp_init_attr& attributes, const std::string& device, std::uint32_t create_flags) {
  if (create_flags == 0) {
    check_errno(rdma_create_qp(id_, pd, &attributes), "rdma_create_qp", device);
    return;
  }
  ibv_qp_init_attr_ex extended{};
  extended.send_cq = attributes.send_cq;
  extended.recv_cq = attributes.recv_cq;
  extended.qp_type = attributes.qp_type;
  extended.sq_sig_all = attributes.sq_sig_all;
  extended.cap = attributes.cap;
  extended.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
  extended.pd = pd;
  extended.create_flags = create_flags;
  check_errno(rdma_create_qp_ex(id_, &extended), "rdma_create_qp_ex", device);
  attributes.cap = extended.cap;
}

void CmId::destroy_qp() noexcept {
  if (id_ != nullptr && id_->qp != nullptr) {
    rdma_destroy_qp(id_);
  }
}

void CmEventAck::operator()(rdma_cm_event* event) const noexcept {
  if (rdma_ack_cm_event(event) != 0) {
    spdlog::warn("rdma_ack_cm_event: {}", std::strerror(errno));
  }
}

CmEvent classify(rdma_cm_event_type type) {
  switch (type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED: return CmEvent::addr_resolved;
    case RDMA_CM_EVENT_ADDR_ERROR: return CmEvent::addr_error;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: return CmEvent::route_resolved;
    case RDMA_CM_EVENT_ROUTE_ERROR: return CmEvent::route_error;
    case RDMA_CM_EVENT_CONNECT_REQUEST: return CmEvent::connect_request;
    case RDMA_CM_EVENT_CONNECT_RESPONSE: return CmEvent::connect_response;
    case RDMA_CM_EVENT_CONNECT_ERROR: return CmEvent::connect_error;
    case RDMA_CM_EVENT_UNREACHABLE: return CmEvent::unreachable;
    case RDMA_CM_EVENT_REJECTED: return CmEvent::rejected;
    case RDMA_CM_EVENT_ESTABLISHED: return CmEvent::established;
    case RDMA_CM_EVENT_DISCONNECTED: return CmEvent::disconnected;
    case RDMA_CM_EVENT_DEVICE_REMOVAL: return CmEvent::device_removal;
    case RDMA_CM_EVENT_MULTICAST_JOIN: return CmEvent::multicast_join;
    case RDMA_CM_EVENT_MULTICAST_ERROR: return CmEvent::multicast_error;
    case RDMA_CM_EVENT_ADDR_CHANGE: return CmEvent::addr_change;
    case RDMA_CM_EVENT_TIMEWAIT_EXIT: return CmEvent::timewait_exit;
    default: return CmEvent::unknown;
  }
}

CmTransition advance(CmState& state, const rdma_cm_event& event) {
  const auto kind = classify(event.event);
  auto transition = cm_transition(state, kind);
  spdlog::debug("cm {}: {} -> {}", to_string(kind), to_string(state), to_string(transition.next));
  if (transition.action == CmAction::fail) {
    spdlog::debug("cm failure: {} (status {})", transition.reason, event.status);
  }
  state = transition.next;
  return transition;
}

std::uint32_t datagram_mtu(ibv_mtu port_active, int path) {
  const auto port = 128U << static_cast<unsigned>(port_active);
  if (path < IBV_MTU_256 || path > IBV_MTU_4096) return port;
  return std::min(port, 128U << static_cast<unsigned>(path));
}

std::uint32_t datagram_mtu(rdma_cm_id* id) {
  ibv_port_attr port{};
  check_returned(ibv_query_port(id->verbs, id->port_num, &port), "ibv_query_port",
                 ibv_get_device_name(id->verbs->device));
  const bool has_path = id->route.num_paths > 0 && id->route.path_rec != nullptr;
  return datagram_mtu(port.active_mtu, has_path ? static_cast<int>(id->route.path_rec->mtu) : 0);
}

rdma_conn_param connection_parameters(const ConnectOffer& offer) {
  rdma_conn_param parameters{};
  if (!offer.private_data.empty()) {
    parameters.private_data = offer.private_data.data();
    parameters.private_data_len = static_cast<std::uint8_t>(offer.private_data.size());
  }
  if (offer.qp_num) parameters.qp_num = *offer.qp_num;
  if (!offer.datagram) {
    parameters.responder_resources = offer.responder_resources;
    parameters.initiator_depth = offer.initiator_depth;
    parameters.retry_count = offer.retry_count;
    parameters.rnr_retry_count = 7;  // 7: retry a receiver not ready without end
  }
  return parameters;
}

RdmaError event_failure(const rdma_cm_event& event, const char* call, std::string subject, std::string address) {
  if (event.event == RDMA_CM_EVENT_REJECTED) {
    return RdmaError(call, subject, ECONNREFUSED, std::move(address));
  }
  if (event.status != 0) {
    return RdmaError(call, subject, event.status < 0 ? -event.status : event.status, std::move(address));
  }
  return RdmaError::without_errno(call, std::move(subject), std::string(rdma_event_str(event.event)) + " with status 0",
                                  std::move(address));
}

std::optional<PeerGate::Slot> admit_request(PeerGate& gate, rdma_cm_id* id) {
  auto admission = gate.admit(rdma_get_peer_addr(id), Clock::now());
  if (admission.admitted()) return std::move(admission.slot);
  const auto refusal = encode_refusal(admission.reason);
  if (rdma_reject(id, refusal.data(), static_cast<std::uint8_t>(refusal.size())) != 0) {
    spdlog::debug("rdma_reject: {}", std::strerror(errno));
  }
  return std::nullopt;
}

std::optional<std::string> refusal_reason(const rdma_cm_event& event) {
  if (event.param.conn.private_data == nullptr) return std::nullopt;
  return decode_refusal(
      {static_cast<const std::uint8_t*>(event.param.conn.private_data), event.param.conn.private_data_len});
}

std::string refused_by_server(const rdma_cm_event& event) {
  const auto reason = refusal_reason(event);
  return reason ? ": the server refused: " + *reason : std::string();
}

CmEventPtr poll_cm_event(EventChannel& channel) {
  return poll_cm_event(channel.get());
}

CmEventPtr poll_cm_event(rdma_event_channel* channel) {
  rdma_cm_event* event = nullptr;
  if (rdma_get_cm_event(channel, &event) != 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return nullptr;
    }
    throw RdmaError("rdma_get_cm_event", "", errno);
  }
  spdlog::debug("cm event {} status {}", rdma_event_str(event->event), event->status);
  return CmEventPtr(event);
}

CmEventPtr next_cm_event(EventChannel& channel, Clock::time_point deadline, int stop_fd, const std::string& awaiting) {
  return next_cm_event(channel.get(), deadline, stop_fd, awaiting);
}

CmEventPtr next_cm_event(rdma_event_channel* channel, Clock::time_point deadline, int stop_fd,
                         const std::string& awaiting) {
  for (;;) {
    if (auto event = poll_cm_event(channel)) {
      return event;
    }
    await_readable({channel->fd}, stop_fd, deadline, awaiting);
  }
}

}  // namespace rdmakit
