#pragma once
// A connected AF_UNIX stream pair for the side-channel tests: `server` and `client`, closed
// at the end of the scope. `extra_flags`: SOCK_NONBLOCK, as the tools' sockets are.

#include <sys/socket.h>
#include <unistd.h>

namespace rdmakit::testing {

struct SocketPair {
  int server = -1;
  int client = -1;
  explicit SocketPair(int extra_flags = 0) {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | extra_flags, 0, fds) == 0) {
      server = fds[0];
      client = fds[1];
    }
  }
  ~SocketPair() {
    if (server >= 0) close(server);
    if (client >= 0) close(client);
  }
  SocketPair(const SocketPair&) = delete;
  SocketPair& operator=(const SocketPair&) = delete;
};

}  // namespace rdmakit::testing
