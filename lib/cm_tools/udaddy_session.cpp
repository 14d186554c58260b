#include "lib/cm_tools/udaddy_session.hpp"

#include <CLI/CLI.hpp>

#include "lib/base/error.hpp"
#include "lib/rdma/addressing.hpp"

namespace rdmakit {

void UdaddyOptions::add_to(ToolRunner& tool) {
  tool.rename_argument("p", "port_space_number");
  auto& app = tool.app();
  flags.add_to(tool, "Datagrams each way per connection (0: connect only)", 65536,
               "Datagram payload bytes (at most the active MTU)");
  app.add_option("-P,--port-space", port_space_by_name, "udp (default) or ipoib");
  app.add_option("-p", port_space_by_number, "Port space as a number: 0x111 (UDP) or 0x2 (IPoIB)");
  app.add_option("--port", flags.port, "Service port (the stock udaddy always uses 7174)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
}

rdma_port_space UdaddyOptions::datagram_port_space() const {
  if (!port_space_by_name.empty() && !port_space_by_number.empty()) {
    throw UsageError("give the port space once: -P or -p");
  }
  const auto& text = port_space_by_name.empty() ? port_space_by_number : port_space_by_name;
  if (text.empty()) return RDMA_PS_UDP;
  const auto space = parse_port_space(text);
  if (!is_datagram(space)) {
    throw UsageError("udaddy needs a datagram port space (udp or ipoib), not " + text);
  }
  return space;
}

void UdaddyOptions::check() const {
  flags.check(datagram_port_space());
}

namespace {

void udaddy_transfer(const ConnectionFlags& flags, ConnectionGroup& group) {
  const auto count = flags.count;
  if (count == 0) return;
  if (flags.is_server()) {
    group.exchange(Step::receive, 0, count, "datagrams from the client(s)");
    group.exchange(Step::reply, count, count, "the replies to go out");
  } else {
    group.exchange(Step::transfer, count, count, "the server's replies from " + group.target());
  }
}

}  // namespace

void run_udaddy(const UdaddyOptions& options, const CommonOptions& common, Report& report) {
  run_group_session(options.flags, options.datagram_port_space(), common, report, {},
                    [&options](ConnectionGroup& group, Report&) { udaddy_transfer(options.flags, group); });
}

}  // namespace rdmakit
