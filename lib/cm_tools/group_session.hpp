#pragma once
// What ucmatose and udaddy share with their stock namesakes: the flags (-s -b -f -c -C -S -t
// --accept-timeout), the setup (without -s listen and accept, with -s connect) and the run
// around each tool's own exchange (lib/cm_tools/ucmatose_session, udaddy_session). mckey joins
// a multicast group instead (lib/cm_tools/mckey_session).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "lib/base/cli_declarations.hpp"
#include "lib/base/report.hpp"
#include "lib/rdma/connection_group.hpp"
#include "lib/tool/cli.hpp"

namespace rdmakit {

struct ConnectionFlags {
  std::string server;
  std::string bind;
  std::string format = "name";
  std::uint16_t port = 0;
  std::size_t connections = 1;
  std::uint32_t count = 10;
  std::uint32_t size = 100;
  std::optional<int> type_of_service;
  double accept_timeout_s = 0;
  // Server: who it serves (--allow, --peer-rate; any peer by default, as the stock servers
  // do); -c is the cap on clients.
  GateOptions peers;

  // Adds the shared flags to the tool's command line; `size_help` says what -S limits apply.
  void add_to(ToolRunner& tool, const std::string& count_help, std::uint32_t max_size, const std::string& size_help);
  // Throws UsageError for an address format or a -s/-b host that cannot work; no RDMA needed.
  void check(rdma_port_space port_space) const;
  GroupOptions group_options(rdma_port_space port_space, const CommonOptions& common, int stop_fd) const;
  bool is_server() const { return server.empty(); }
};

// Server (no -s): binds, listens and accepts every connection. Client: connects them all.
void establish(ConnectionGroup& group, const ConnectionFlags& flags, rdma_port_space port_space, Report& report);

// One tool's part of a group session: what its connections do once they are set up.
using GroupExchange = std::function<void(ConnectionGroup& group, Report& report)>;

// A group session: the port space in effect and the messages asked for into the report,
// the group made from the flags (`adjust` may change its options first), set up
// (establish) and handed to `exchange`. The report is filled from the group however the
// run ends (lib/cm_tools/group_report).
void run_group_session(const ConnectionFlags& flags, rdma_port_space port_space, const CommonOptions& common,
                       Report& report, const std::function<void(GroupOptions&)>& adjust, const GroupExchange& exchange);

}  // namespace rdmakit
