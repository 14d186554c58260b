#pragma once
// mckey's session: rdma_cm multicast, interoperable with rdma-core's mckey. Each connection
// joins the group on its own UD QP; a receiver counts datagrams, a sender (-s) sends them.
// Join latency is measured per connection, MULTICAST_ERROR and ADDR_CHANGE events are
// reported, and a receiver whose datagrams are lost stops at the timeout with the counts so
// far. The report is the connection group's (lib/cm_tools/group_report).

#include <cstddef>
#include <cstdint>
#include <string>

#include "lib/base/report.hpp"
#include "lib/tool/cli.hpp"

namespace rdmakit {

struct MckeyOptions {
  std::string group;           // -m: IP multicast address
  std::string unmapped_group;  // -M: AF_IB MGID
  bool sender = false;
  std::string bind;
  std::size_t connections = 1;
  std::uint32_t count = 10;
  std::uint32_t size = 100;
  std::string port_space = "0x111";
  bool send_only = false;
  bool block_loopback = false;
  double settle_s = 3;
  double first_timeout_s = 30;

  // Registers mckey's flags (-m -M -s -b -c -C -S -p -o -l --settle --first-timeout).
  void add_to(ToolRunner& tool);
  // Throws UsageError for what cannot work (no group, -M without -b, a connected port
  // space, -o without -s, a name that resolves to nothing); no RDMA device needed.
  void check() const;
};

// Joins the group on every connection, sends (-s) or receives -C datagrams on each, and
// leaves.
void run_mckey(const MckeyOptions& options, const CommonOptions& common, Report& report);

}  // namespace rdmakit
