#pragma once
// The side channels' plain TCP I/O: one non-blocking connect, and sends and receives, every
// one bounded by a deadline and ended by the stop descriptor. Under the key handshake's
// sealed frames (sealed_frames) and under perftest's out-of-band exchange (send_bw), which
// is why it carries no cryptography of its own.

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "lib/base/file_descriptor.hpp"
#include "lib/base/wait.hpp"

namespace rdmakit::tcp {

// A connected, non-blocking TCP socket to `to` (from `from` when given). Throws
// std::system_error with connect's errno (ECONNREFUSED, ETIMEDOUT when the deadline passed
// first, ...), and RunStopped when `stop_fd` fires (-1: none).
FileDescriptor connect_to(const sockaddr* to, socklen_t length, Clock::time_point deadline, int stop_fd,
                          const sockaddr* from = nullptr, socklen_t from_length = 0);

// A non-blocking TCP listener on `address` (SO_REUSEADDR; an IPv6 wildcard takes IPv4 too).
// Throws std::system_error naming `what` and where, with bind's errno (EADDRINUSE, ...).
FileDescriptor listen_on(const sockaddr* address, socklen_t length, int backlog, std::string_view what);

struct Accepted;
// One connection already waiting on the non-blocking `listener`, itself non-blocking, or
// nullopt when none is (connections aborted before the accept are passed over). Throws
// std::system_error with accept's errno (EMFILE, ...).
std::optional<Accepted> accept_waiting(int listener);

// The next connection on `listener` whose address `admit` accepts, non-blocking; those it
// refuses are closed before a byte is read (`admit` says why, if it wants). nullopt when
// `deadline` passes first; RunStopped when `stop_fd` fires.
struct Accepted {
  FileDescriptor socket;
  sockaddr_storage peer{};
};
std::optional<Accepted> accept_admitted(int listener, Clock::time_point deadline, int stop_fd,
                                        const std::function<bool(const sockaddr*)>& admit);

// Each returns false (or nullopt) when `deadline` passes first, throws RunStopped when
// `stop_fd` fires, and ProtocolError when the peer is gone (closed, reset).
bool send_bytes(int fd, std::string_view bytes, Clock::time_point deadline, int stop_fd);
// Waits for one arrival and appends it to `into`, at most `at_most` bytes: the count appended,
// 0 when the peer closed the connection.
std::optional<std::size_t> receive_some(int fd, std::string& into, std::size_t at_most, Clock::time_point deadline,
                                        int stop_fd);
// Exactly into.size() bytes, never more: the count received, into.size() unless `deadline`
// passed first; a peer that closes first is a ProtocolError naming `what` and how far it got.
std::size_t receive_exactly(int fd, std::span<std::uint8_t> into, Clock::time_point deadline, int stop_fd,
                            std::string_view what);

}  // namespace rdmakit::tcp
