#pragma once
// rdma_server's and rdma_client's two sides of the echo exchange (lib/cm_tools/messages.hpp)
// over librdmacm's synchronous API, interoperable with rdma-core's rdma_server and
// rdma_client. Both fill the report as they go and never print results.

#include <chrono>
#include <cstdint>
#include <string>

#include "lib/base/report.hpp"
#include "lib/cm_tools/messages.hpp"
#include "lib/tool/cli.hpp"

namespace rdmakit {

struct EchoClientOptions {
  std::string server = "127.0.0.1";
  std::uint16_t port = echo::default_port;
  std::uint32_t count = 1;  // exchanges on the connection
  bool no_inline = false;   // send from registered memory even where inline sends work

  // Registers rdma_client's flags: -s -p -C --no-inline.
  void add_to(ToolRunner& tool);
  // Throws UsageError for a name that resolves to nothing; no RDMA needed.
  void check() const;
};

// ServerOptions: -P (keep serving clients, each on a thread of its own) and --accept-timeout.
struct EchoServerOptions : ServerOptions {
  std::string server = "0.0.0.0";  // the address to listen on
  std::uint16_t port = echo::default_port;
  bool no_inline = false;

  // Registers rdma_server's flags: -s -p -P --accept-timeout --no-inline.
  void add_to(ToolRunner& tool);
  // Throws UsageError for a name that resolves to nothing; no RDMA needed.
  void check() const;
};

// Connects, sends `count` messages, each answered before the next, timing the round trips,
// and disconnects. Every wait is bounded by `timeout` and the stop signal.
void run_rdma_client(const EchoClientOptions& options, std::chrono::milliseconds timeout, Report& report);

// Listens and answers one client's messages with the same bytes until the one that says no
// more follow (persistent: each client's, until the stop signal or the accept timeout).
void run_rdma_server(const EchoServerOptions& options, std::chrono::milliseconds timeout, Report& report);

}  // namespace rdmakit
