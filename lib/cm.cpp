#include "lib/cm.hpp"

#include <arpa/inet.h>
#include <netdb.h>

#include <infiniband/ib.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "lib/error.hpp"

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

SocketAddress parse_address(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    throw UsageError("cannot resolve address '" + host + "': " + gai_strerror(rc));
  }
  SocketAddress address;
  std::memcpy(&address.storage, found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  address.set_port(port);
  return address;
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
  if (channel_ == nullptr) {
    throw RdmaError("rdma_create_event_channel", "", errno);
  }
  set_nonblocking(channel_->fd, "rdma event channel");
}

EventChannel::~EventChannel() {
  rdma_destroy_event_channel(channel_);
}

CmId::CmId(EventChannel& channel, rdma_port_space port_space) {
  if (rdma_create_id(channel.get(), &id_, nullptr, port_space) != 0) {
    throw RdmaError("rdma_create_id", "", errno);
  }
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
  if (id_->qp != nullptr) {
    rdma_destroy_qp(id_);
  }
  if (rdma_destroy_id(id_) != 0) {
    spdlog::warn("rdma_destroy_id: {}", std::strerror(errno));
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

CmEventPtr poll_cm_event(EventChannel& channel) {
  rdma_cm_event* event = nullptr;
  if (rdma_get_cm_event(channel.get(), &event) != 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return nullptr;
    }
    throw RdmaError("rdma_get_cm_event", "", errno);
  }
  spdlog::debug("cm event {} status {}", rdma_event_str(event->event), event->status);
  return CmEventPtr(event);
}

CmEventPtr next_cm_event(EventChannel& channel, Clock::time_point deadline, int stop_fd, const std::string& awaiting) {
  for (;;) {
    if (auto event = poll_cm_event(channel)) {
      return event;
    }
    await_readable({channel.fd()}, stop_fd, deadline, awaiting);
  }
}

}  // namespace rdmakit
