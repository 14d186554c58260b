#pragma once
// ucmatose's session: many reliable connections set up concurrently through one rdma_cm
// event channel, interoperable with rdma-core's ucmatose (the server sends first, the client
// answers, the server disconnects). The report carries a cmtime-style table of every CM step
// across connections and the connection setup rate (lib/cm_tools/group_report).

#include <optional>
#include <string>

#include "lib/base/report.hpp"
#include "lib/cm_tools/group_session.hpp"
#include "lib/tool/cli.hpp"

namespace rdmakit {

struct UcmatoseOptions {
  UcmatoseOptions() { flags.port = 7471; }

  ConnectionFlags flags;
  std::string port_space = "tcp";
  bool migrate = false;
  std::optional<int> ack_timeout;

  // Registers ucmatose's flags: the group's, then -P -p -m -a.
  void add_to(ToolRunner& tool);
  // tcp or ib; throws UsageError for a datagram port space.
  rdma_port_space connected_port_space() const;
  // Throws UsageError for what cannot work; no RDMA needed.
  void check() const;
};

// Sets up the connections, exchanges -C messages each way on each, migrates them with -m,
// and disconnects (the server) or waits for the server to (the client).
void run_ucmatose(const UcmatoseOptions& options, const CommonOptions& common, Report& report);

}  // namespace rdmakit
