// ucmatose: many reliable connections set up concurrently through one rdma_cm event
// channel, interoperable with rdma-core's ucmatose (the server sends first, the client
// answers, the server disconnects). Reports a cmtime-style table of every CM step across
// connections and the connection setup rate.

#include <optional>

#include <spdlog/spdlog.h>

#include "lib/cli.hpp"
#include "lib/connection_group.hpp"
#include "lib/diag_probe.hpp"
#include "lib/sync_endpoint.hpp"

namespace {

struct Options {
  std::string server;
  std::string bind;
  std::string format = "name";
  std::string port_space = "tcp";
  std::size_t connections = 1;
  std::uint32_t count = 10;
  std::uint32_t size = 100;
  std::optional<int> type_of_service;
  double accept_timeout_s = 0;
  std::string port = "7471";
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
  rdmakit::GroupOptions group_options;
  group_options.port_space = port_space_of(o);
  group_options.connections = o.connections;
  group_options.message_count = o.count;
  group_options.message_size = o.size;
  if (o.type_of_service) group_options.type_of_service = static_cast<std::uint8_t>(*o.type_of_service);
  if (o.ack_timeout) group_options.ack_timeout = static_cast<std::uint8_t>(*o.ack_timeout);
  group_options.timeout = common.timeout();
  group_options.stop_fd = stop.fd();
  if (o.accept_timeout_s > 0) {
    group_options.accept_timeout = std::chrono::milliseconds(static_cast<long long>(o.accept_timeout_s * 1000));
  }

  const auto hints = rdmakit::addressing_hints(o.format, group_options.port_space);
  const auto addresses = rdmakit::lookup_addresses(o.bind, o.server, o.port, hints);
  rdmakit::ConnectionGroup group(group_options);
  const rdmakit::FillReportOnExit fill(group, report);
  const bool server = o.server.empty();
  report.role = server ? "server" : "client";
  if (server) {
    group.listen(addresses->get()->ai_src_addr);
    spdlog::info("listening on {}", group.local_address());
    group.accept();
  } else {
    group.connect(*addresses->get());
  }
  if (o.count > 0) {
    // Receives were posted before connecting, so both sides may send at once; a stock
    // client waits for the server's messages before it answers, which this also serves.
    group.exchange("transfer", o.count, o.count, server ? "the clients' messages" : "the server's messages");
  }
  if (o.migrate) {
    const auto started = rdmakit::Clock::now();
    group.migrate();
    report.extra["migrate_ms"] = rdmakit::elapsed_ms(started);
  }
  if (server) {
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
  auto& app = tool.app();
  app.add_option("-s,--server", o.server, "Server address (client mode); without it, run as the server");
  app.add_option("-b,--bind", o.bind, "Local address to bind (server: listen address)");
  app.add_option("-f,--address-format", o.format, "How to read addresses: name, ip, ipv6 or gid")
      ->capture_default_str();
  app.add_option("-P,--port-space", o.port_space, "tcp or ib")->capture_default_str();
  app.add_option("-p,--port", o.port, "Service port")->capture_default_str()->check(CLI::Range(1, 65535));
  app.add_option("-c,--connections", o.connections, "Connections, set up concurrently (both sides must agree)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("-C,--count", o.count, "Messages each way per connection (0: connect only)")
      ->capture_default_str()
      ->check(CLI::Range(0, 16384));
  app.add_option("-S,--size", o.size, "Message bytes")->capture_default_str()->check(CLI::Range(1, 1 << 30));
  app.add_option("-t,--tos", o.type_of_service, "Type of service")->check(CLI::Range(0, 255));
  app.add_option("--accept-timeout", o.accept_timeout_s, "Server: seconds to wait for the first client (0 = forever)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  app.add_flag("-m,--migrate", o.migrate, "Move every cm_id to a new event channel before disconnecting");
  app.add_option("-a,--ack-timeout", o.ack_timeout, "Local ACK timeout exponent (4.096 us * 2^N)")
      ->check(CLI::Range(0, 31));
  return tool.run(
      argc, argv,
      [&] {
        port_space_of(o);
        rdmakit::addressing_hints(o.format, RDMA_PS_TCP);
      },
      [&](rdmakit::Report& report) {
        report.arguments = {{"server", o.server},  {"bind", o.bind},
                            {"port", o.port},      {"count", o.count},
                            {"size", o.size},      {"connections", o.connections},
                            {"format", o.format},  {"port_space", o.port_space},
                            {"migrate", o.migrate}};
        report.iterations_requested = static_cast<std::uint64_t>(o.count) * o.connections;
        run(o, tool.common(), report);
      });
}
