// udaddy: unreliable datagrams over rdma_cm, interoperable with rdma-core's udaddy. The
// client resolves and connects (SIDR) one UD QP per connection, takes the server's path,
// QP number and Q_Key from ESTABLISHED, and sends; the server answers each connection to
// the address and QP number carried by its first datagram. A lost datagram ends the run
// at the timeout with the counts so far instead of hanging.

#include "lib/core/cli.hpp"
#include "lib/probe/host_probe.hpp"
#include "lib/rdma/connection_group.hpp"
#include "lib/rdma/group_cli.hpp"

namespace {

struct Options {
  rdmakit::ConnectionFlags flags;
  std::string port_space_by_name;    // -P udp|ipoib
  std::string port_space_by_number;  // -p 0x111|0x2 (the stock tool's older spelling)
};

rdma_port_space port_space_of(const Options& o) {
  if (!o.port_space_by_name.empty() && !o.port_space_by_number.empty()) {
    throw rdmakit::UsageError("give the port space once: -P or -p");
  }
  const auto& text = o.port_space_by_name.empty() ? o.port_space_by_number : o.port_space_by_name;
  if (text.empty()) return RDMA_PS_UDP;
  const auto space = rdmakit::parse_port_space(text);
  if (!rdmakit::is_datagram(space)) {
    throw rdmakit::UsageError("udaddy needs a datagram port space (udp or ipoib), not " + text);
  }
  return space;
}

void run(const Options& o, const rdmakit::CommonOptions& common, rdmakit::Report& report) {
  const rdmakit::StopSignal stop;
  const auto space = port_space_of(o);
  rdmakit::ConnectionGroup group(o.flags.group_options(space, common, stop.fd()));
  const rdmakit::FillReportOnExit fill(group, report);
  rdmakit::establish(group, o.flags, space, report);
  const auto count = o.flags.count;
  if (count == 0) return;
  if (o.flags.is_server()) {
    group.exchange("receive", 0, count, "datagrams from the client(s)");
    group.exchange("reply", count, count, "the replies to go out");
  } else {
    group.exchange("transfer", count, count, "the server's replies from " + group.target());
  }
}

}  // namespace

int main(int argc, char** argv) {
  rdmakit::ToolRunner tool("udaddy", "UD datagrams over rdma_cm (interoperates with rdma-core udaddy)");
  tool.enable_diagnose(rdmakit::diag::diagnose_for_tool);
  Options o;
  o.flags.port = 7174;  // the stock udaddy's fixed port
  tool.rename_argument("p", "port_space_number");
  auto& app = tool.app();
  o.flags.add_to(tool, "Datagrams each way per connection (0: connect only)", 65536,
                 "Datagram payload bytes (at most the active MTU)");
  app.add_option("-P,--port-space", o.port_space_by_name, "udp (default) or ipoib");
  app.add_option("-p", o.port_space_by_number, "Port space as a number: 0x111 (UDP) or 0x2 (IPoIB)");
  app.add_option("--port", o.flags.port, "Service port (the stock udaddy always uses 7174)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  return tool.run(
      argc, argv, [&] { o.flags.check(port_space_of(o)); },
      [&](rdmakit::Report& report) {
        // The port space in effect, by name, whichever spelling chose it.
        report.arguments["port_space"] = rdmakit::port_space_name(port_space_of(o));
        report.iterations_requested = static_cast<std::uint64_t>(o.flags.count) * o.flags.connections;
        run(o, tool.common(), report);
      });
}
