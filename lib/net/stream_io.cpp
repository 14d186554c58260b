#include "lib/net/stream_io.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <system_error>

#include <fmt/format.h>

#include "lib/base/error.hpp"

namespace rdmakit::tcp {

FileDescriptor connect_to(const sockaddr* to, socklen_t length, Clock::time_point deadline, int stop_fd,
                          const sockaddr* from, socklen_t from_length) {
  auto socket =
      FileDescriptor::checked(::socket(to->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), "socket");
  if (from != nullptr && ::bind(socket.get(), from, from_length) != 0) {
    throw std::system_error(errno, std::generic_category(), "bind");
  }
  if (::connect(socket.get(), to, length) != 0 && errno != EINPROGRESS) {
    throw std::system_error(errno, std::generic_category(), "connect");
  }
  const auto waited = await_events(socket.get(), POLLOUT, stop_fd, deadline);
  if (waited == SocketWait::stopped) throw RunStopped(StopReason::interrupted, "stopped by a signal");
  if (waited == SocketWait::timed_out) throw std::system_error(ETIMEDOUT, std::generic_category(), "connect");
  int error = 0;
  socklen_t error_length = sizeof error;
  getsockopt(socket.get(), SOL_SOCKET, SO_ERROR, &error, &error_length);
  if (error != 0) throw std::system_error(error, std::generic_category(), "connect");
  return socket;
}

FileDescriptor listen_on(const sockaddr* address, socklen_t length, int backlog, std::string_view what) {
  auto socket =
      FileDescriptor::checked(::socket(address->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), "socket");
  const int on = 1;
  const int off = 0;
  setsockopt(socket.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (address->sa_family == AF_INET6) setsockopt(socket.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  if (::bind(socket.get(), address, length) != 0) {
    throw std::system_error(errno, std::generic_category(), fmt::format("binding {}", what));
  }
  if (::listen(socket.get(), backlog) != 0) {
    throw std::system_error(errno, std::generic_category(), fmt::format("listening on {}", what));
  }
  return socket;
}

std::optional<Accepted> accept_waiting(int listener) {
  for (;;) {
    sockaddr_storage peer{};
    socklen_t length = sizeof peer;
    const int fd = accept4(listener, reinterpret_cast<sockaddr*>(&peer), &length, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) return Accepted{.socket = FileDescriptor(fd), .peer = peer};
    if (errno == ECONNABORTED || errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return std::nullopt;
    throw std::system_error(errno, std::generic_category(), "accept");
  }
}

std::optional<Accepted> accept_admitted(int listener, Clock::time_point deadline, int stop_fd,
                                        const std::function<bool(const sockaddr*)>& admit) {
  for (;;) {
    while (auto accepted = accept_waiting(listener)) {
      if (admit(reinterpret_cast<const sockaddr*>(&accepted->peer))) return accepted;
      // the others are closed unread
    }
    const auto waited = await_events(listener, POLLIN, stop_fd, deadline);
    if (waited == SocketWait::stopped) throw RunStopped(StopReason::interrupted, "stopped by a signal");
    if (waited == SocketWait::timed_out) return std::nullopt;
  }
}

bool send_bytes(int fd, std::string_view bytes, Clock::time_point deadline, int stop_fd) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const auto wrote = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (wrote > 0) {
      sent += static_cast<std::size_t>(wrote);
      continue;
    }
    if (wrote < 0 && errno != EAGAIN && errno != EINTR) {
      throw ProtocolError(fmt::format("the peer is gone ({})", std::strerror(errno)));
    }
    const auto waited = await_events(fd, POLLOUT, stop_fd, deadline);
    if (waited == SocketWait::stopped) throw RunStopped(StopReason::interrupted, "stopped by a signal");
    if (waited == SocketWait::timed_out) return false;
  }
  return true;
}

std::optional<std::size_t> receive_some(int fd, std::string& into, std::size_t at_most, Clock::time_point deadline,
                                        int stop_fd) {
  std::array<char, 65536> chunk{};
  for (;;) {
    const auto waited = await_events(fd, POLLIN, stop_fd, deadline);
    if (waited == SocketWait::stopped) throw RunStopped(StopReason::interrupted, "stopped by a signal");
    if (waited == SocketWait::timed_out) return std::nullopt;
    const auto got = ::recv(fd, chunk.data(), std::clamp<std::size_t>(at_most, 1, chunk.size()), MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (got < 0) throw ProtocolError(fmt::format("the connection failed ({})", std::strerror(errno)));
    into.append(chunk.data(), static_cast<std::size_t>(got));
    return static_cast<std::size_t>(got);
  }
}

std::size_t receive_exactly(int fd, std::span<std::uint8_t> into, Clock::time_point deadline, int stop_fd,
                            std::string_view what) {
  std::string got;
  while (got.size() < into.size()) {
    const auto arrived = receive_some(fd, got, into.size() - got.size(), deadline, stop_fd);
    if (!arrived) break;
    if (*arrived == 0) {
      throw ProtocolError(fmt::format("the peer closed the connection {} of the {} bytes of {}",
                                      got.empty() ? "before any" : fmt::format("after {}", got.size()), into.size(),
                                      what));
    }
  }
  std::copy(got.begin(), got.end(), into.begin());
  return got.size();
}

}  // namespace rdmakit::tcp
