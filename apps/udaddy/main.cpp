// udaddy: unreliable datagrams over rdma_cm, interoperable with rdma-core's udaddy. The
// client resolves and connects (SIDR) one UD QP per connection, takes the server's path,
// QP number and Q_Key from ESTABLISHED, and sends; the server answers each connection to
// the address and QP number carried by its first datagram. A lost datagram ends the run
// at the timeout with the counts so far instead of hanging.

#include <limits>
#include <optional>

#include "lib/cli.hpp"
#include "lib/connection_group.hpp"
#include "lib/diag_probe.hpp"
#include "lib/sync_endpoint.hpp"

#include <spdlog/spdlog.h>

namespace {

struct Options {
  std::string server;
  std::string bind;
  std::string format = "name";
  std::string port_space_by_name;    // -P udp|ipoib
  std::string port_space_by_number;  // -p 0x111|0x2 (the stock tool's older spelling)
  std::size_t connections = 1;
  std::uint32_t count = 10;
  std::uint32_t size = 100;
  std::optional<int> type_of_service;
  double accept_timeout_s = 0;
  std::string port = "7174";
};

rdma_port_space port_space_of(const Options& o) {
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
  rdmakit::GroupOptions group_options;
  group_options.port_space = port_space_of(o);
  group_options.connections = o.connections;
  group_options.message_count = o.count;
  group_options.message_size = o.size;
  if (o.type_of_service) group_options.type_of_service = static_cast<std::uint8_t>(*o.type_of_service);
  group_options.timeout = common.timeout();
  group_options.stop_fd = stop.fd();
  if (o.accept_timeout_s > 0) {
    group_options.accept_timeout = std::chrono::milliseconds(static_cast<long long>(o.accept_timeout_s * 1000));
  }

  const auto hints = rdmakit::addressing_hints(o.format, group_options.port_space);
  const auto addresses = rdmakit::lookup_addresses(o.bind, o.server, o.port, hints);
  rdmakit::ConnectionGroup group(group_options);
  const rdmakit::FillReportOnExit fill(group, report);
  if (o.server.empty()) {
    report.role = "server";
    group.listen(addresses->get()->ai_src_addr);
    spdlog::info("listening on {}", group.local_address());
    group.accept();
    if (o.count > 0) {
      group.exchange("receive", 0, o.count, "datagrams from the client(s)");
      group.exchange("reply", o.count, 0, "the replies to go out");
    }
  } else {
    report.role = "client";
    group.connect(*addresses->get());
    if (o.count > 0) {
      group.exchange("transfer", o.count, o.count, "the server's replies from " + group.target());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  rdmakit::ToolRunner tool("udaddy", "UD datagrams over rdma_cm (interoperates with rdma-core udaddy)");
  tool.enable_diagnose(rdmakit::diag::diagnose_for_tool);
  Options o;
  auto& app = tool.app();
  app.add_option("-s,--server", o.server, "Server address (client mode); without it, run as the server");
  app.add_option("-b,--bind", o.bind, "Local address to bind (server: listen address)");
  app.add_option("-f,--address-format", o.format, "How to read addresses: name, ip, ipv6 or gid")
      ->capture_default_str();
  app.add_option("-P,--port-space", o.port_space_by_name, "udp (default) or ipoib");
  app.add_option("-p", o.port_space_by_number, "Port space as a number: 0x111 (UDP) or 0x2 (IPoIB)");
  app.add_option("--port", o.port, "Service port")->capture_default_str()->check(CLI::Range(1, 65535));
  app.add_option("-c,--connections", o.connections, "Connections (both sides must agree)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("-C,--count", o.count, "Datagrams each way per connection (0: connect only)")
      ->capture_default_str()
      ->check(CLI::Range(0, 16384));
  app.add_option("-S,--size", o.size, "Datagram payload bytes (at most the active MTU)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  app.add_option("-t,--tos", o.type_of_service, "Type of service")->check(CLI::Range(0, 255));
  app.add_option("--accept-timeout", o.accept_timeout_s, "Server: seconds to wait for the first client (0 = forever)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  return tool.run(
      argc, argv,
      [&] {
        port_space_of(o);
        rdmakit::addressing_hints(o.format, RDMA_PS_UDP);
        if (!o.port_space_by_name.empty() && !o.port_space_by_number.empty()) {
          throw rdmakit::UsageError("give the port space once: -P or -p");
        }
      },
      [&](rdmakit::Report& report) {
        report.arguments = {{"server", o.server}, {"bind", o.bind},
                            {"port", o.port},     {"count", o.count},
                            {"size", o.size},     {"connections", o.connections},
                            {"format", o.format}, {"port_space", rdmakit::port_space_name(port_space_of(o))}};
        report.iterations_requested = static_cast<std::uint64_t>(o.count) * o.connections;
        run(o, tool.common(), report);
      });
}
