#pragma once
// udaddy's session: unreliable datagrams over rdma_cm, interoperable with rdma-core's
// udaddy. The client resolves and connects (SIDR) one UD QP per connection, takes the
// server's path, QP number and Q_Key from ESTABLISHED, and sends; the server answers each
// connection to the address and QP number carried by its first datagram. A lost datagram
// ends the run at the timeout with the counts so far instead of hanging.

#include <string>

#include "lib/base/report.hpp"
#include "lib/cm_tools/group_session.hpp"
#include "lib/tool/cli.hpp"

namespace rdmakit {

struct UdaddyOptions {
  UdaddyOptions() { flags.port = 7174; }  // the stock udaddy's fixed port

  ConnectionFlags flags;
  std::string port_space_by_name;    // -P udp|ipoib
  std::string port_space_by_number;  // -p 0x111|0x2 (the stock tool's older spelling)

  // Registers udaddy's flags: the group's, then -P -p --port.
  void add_to(ToolRunner& tool);
  // udp (the default) or ipoib, by either spelling; throws UsageError for both spellings
  // given or a connected port space.
  rdma_port_space datagram_port_space() const;
  // Throws UsageError for what cannot work; no RDMA needed.
  void check() const;
};

// Sets up the connections; the client sends -C datagrams on each and awaits the replies,
// the server receives them and answers each.
void run_udaddy(const UdaddyOptions& options, const CommonOptions& common, Report& report);

}  // namespace rdmakit
