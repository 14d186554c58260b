// ucmatose: many reliable connections set up concurrently through one rdma_cm event
// channel, interoperable with rdma-core's ucmatose (the server sends first, the client
// answers, the server disconnects). Reports a cmtime-style table of every CM step across
// connections and the connection setup rate.

#include <optional>

#include "lib/core/cli.hpp"
#include "lib/probe/host_probe.hpp"
#include "lib/rdma/connection_group.hpp"
#include "lib/rdma/group_cli.hpp"

namespace {

struct Options {
  rdmakit::ConnectionFlags flags;
  std::string port_space = "tcp";
  bool migrate = false;
  std::optional<int> ack_timeout;
};

rdma_port_space port_space_of(const Options& o) {
  const auto space = rdmakit::parse_port_space(o.port_space);
  if (rdmakit::is_datagram(space)) {
    throw rdmakit::UsageError("ucmatose needs a connected port space (tcp or ib), not " + o.port_space);
  }
  return space;
}

void run(const Options& o, const rdmakit::CommonOptions& common, rdmakit::Report& report) {
  const rdmakit::StopSignal stop;
  const auto space = port_space_of(o);
  auto group_options = o.flags.group_options(space, common, stop.fd());
  if (o.ack_timeout) group_options.ack_timeout = static_cast<std::uint8_t>(*o.ack_timeout);
  rdmakit::ConnectionGroup group(group_options);
  const rdmakit::FillReportOnExit fill(group, report);
  rdmakit::establish(group, o.flags, space, report);
  if (o.flags.count > 0) {
    // Receives were posted before connecting, so both sides may send at once; a stock
    // client waits for the server's messages before it answers, which this also serves.
    group.exchange("transfer", o.flags.count, o.flags.count,
                   o.flags.is_server() ? "the clients' messages" : "the server's messages");
  }
  if (o.migrate) {
    const auto started = rdmakit::Clock::now();
    group.migrate();
    report.add(rdmakit::NamedValue("migrate_ms", rdmakit::elapsed_ms(started)));
  }
  if (o.flags.is_server()) {
    group.disconnect();
  } else {
    group.await_disconnect();
  }
}

}  // namespace

int main(int argc, char** argv) {
  rdmakit::ToolRunner tool("ucmatose",
                           "Concurrent RC connections over rdma_cm (interoperates with rdma-core ucmatose)");
  tool.enable_diagnose(rdmakit::diag::diagnose_for_tool);
  Options o;
  o.flags.port = 7471;
  auto& app = tool.app();
  o.flags.add_to(tool, "Messages each way per connection (0: connect only)", 1u << 30, "Message bytes");
  app.add_option("-P,--port-space", o.port_space, "tcp or ib")->capture_default_str();
  app.add_option("-p,--port", o.flags.port, "Service port")->capture_default_str()->check(CLI::Range(1, 65535));
  app.add_flag("-m,--migrate", o.migrate, "Move every cm_id to a new event channel before disconnecting");
  app.add_option("-a,--ack-timeout", o.ack_timeout, "Local ACK timeout exponent (4.096 us * 2^N)")
      ->check(CLI::Range(0, 31));
  return tool.run(
      argc, argv, [&] { o.flags.check(port_space_of(o)); },
      [&](rdmakit::Report& report) {
        // The port space in effect, by name, whichever spelling chose it.
        report.arguments["port_space"] = rdmakit::port_space_name(port_space_of(o));
        report.iterations_requested = static_cast<std::uint64_t>(o.flags.count) * o.flags.connections;
        run(o, tool.common(), report);
      });
}
