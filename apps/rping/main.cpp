// rping: RDMA ping over rdma_cm, wire-compatible with rdma-core's rping, with timings,
// latency statistics and a JSON report.

#include <limits>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "lib/bench/ping_session.hpp"
#include "lib/core/cli.hpp"
#include "lib/core/persistent.hpp"
#include "lib/probe/host_probe.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/wire/protocol.hpp"

namespace {

// The server flags (-P, --accept-timeout) come from ServerOptions.
struct Options : rdmakit::ServerOptions {
  bool server = false;
  bool client = false;
  std::string address;
  std::string source;
  std::uint16_t port = rdmakit::rping::default_port;
  std::int64_t count = 0;
  std::optional<std::uint32_t> size;
  bool verbose = false;
  bool validate = false;
  bool self_managed_qp = false;
  std::optional<int> tos;
};

void add_options(CLI::App& app, Options& o) {
  app.add_flag("-s,--server", o.server, "Run as server");
  app.add_flag("-c,--client", o.client, "Run as client");
  app.add_option("-a,--address", o.address, "Server address (client: where to connect; server: where to listen)");
  app.add_option("-I,--source", o.source, "Client: source address to bind to");
  app.add_option("-p,--port", o.port, "Port")->capture_default_str()->check(CLI::Range(1, 65535));
  app.add_option("-C,--count", o.count, "Client: ping this many times (0 = until Ctrl-C)")
      ->capture_default_str()
      ->check(CLI::Range(0, std::numeric_limits<int>::max()));
  app.add_option("-S,--size", o.size, "Ping data size (client default 64; server: largest accepted, default 65535)");
  app.add_flag("-v,--verbose", o.verbose, "Print ping data");
  app.add_flag("-V,--validate", o.validate, "Validate ping data");
  o.add_to(app, "Server: keep serving, one thread per connection",
           "Server: seconds to wait for a client, with -P for each next one (0 = forever)");
  app.add_flag("-q,--self-qp", o.self_managed_qp, "Create the QP with ibv_create_qp and drive its states ourselves");
  app.add_option("-t,--tos", o.tos, "Type of service for the connection")->check(CLI::Range(0, 255));
}

void validate(const Options& o) {
  if (o.server == o.client) {
    throw rdmakit::UsageError("choose exactly one of -s (server) and -c (client)");
  }
  if (o.client && o.address.empty()) {
    throw rdmakit::UsageError("the client needs the server address: -a ADDRESS");
  }
  if (o.server && !o.source.empty()) {
    throw rdmakit::UsageError("-I (source address) is for the client; the server listens on -a");
  }
  if (o.client && o.persistent) {
    throw rdmakit::UsageError("-P (persistent) is a server option");
  }
  if (o.size && (*o.size < rdmakit::rping::min_payload_size || *o.size > rdmakit::rping::max_payload_size)) {
    throw rdmakit::UsageError(fmt::format("-S {} is outside the valid range {} to {}", *o.size,
                                          rdmakit::rping::min_payload_size, rdmakit::rping::max_payload_size));
  }
  // A name that resolves to nothing is a usage error even where no RDMA device is there to run on.
  rdmakit::check_resolvable(o.address);
  rdmakit::check_resolvable(o.source);
}

void run_server(const Options& o, const rdmakit::EndpointOptions& endpoint_options, const rping::PingOptions& ping,
                rdmakit::Report& report) {
  const auto bind_to = rdmakit::parse_address(o.address.empty() ? "0.0.0.0" : o.address, o.port);
  rdmakit::Listener listener(bind_to, o.persistent ? 64 : 1, endpoint_options);
  report.local_address = listener.local_address();
  auto idle_deadline = [&]() -> std::optional<rdmakit::Clock::time_point> {
    const auto wait = o.accept_timeout();
    if (!wait) return std::nullopt;
    return rdmakit::Clock::now() + *wait;
  };
  const auto deadline = idle_deadline();

  if (!o.persistent) {
    auto endpoint = listener.next_request(deadline);
    report.peer_address = endpoint->peer_address();
    rdmakit::serve_counted(
        [&](rdmakit::ServedConnection& served) { rping::serve_connection(*endpoint, ping, report, served); }, report);
    return;
  }

  // --accept-timeout is how long a persistent server stays up without a new client.
  rdmakit::serve_each_client(
      [&] {
        auto endpoint = listener.next_request(idle_deadline());
        return rdmakit::ConnectionRequest<rdmakit::Endpoint>{endpoint->peer_address(), std::move(endpoint)};
      },
      [&ping](rdmakit::Endpoint& endpoint, rdmakit::Report& connection_report, rdmakit::ServedConnection& served) {
        rping::serve_connection(endpoint, ping, connection_report, served);
      },
      report);
}

}  // namespace

int main(int argc, char** argv) {
  rdmakit::ToolRunner tool("rping", "RDMA ping over rdma_cm (interoperates with rdma-core rping)");
  tool.enable_diagnose(rdmakit::diag::diagnose_for_tool);
  Options options;
  add_options(tool.app(), options);
  return tool.run(
      argc, argv, [&] { validate(options); },
      [&](rdmakit::Report& report) {
        report.role = options.server ? "server" : "client";
        report.iterations_requested = options.server ? 0 : static_cast<std::uint64_t>(options.count);

        const rdmakit::StopSignal stop;
        rdmakit::EndpointOptions endpoint_options;
        endpoint_options.limits.timeout = tool.common().timeout();
        endpoint_options.limits.stop_fd = stop.fd();
        endpoint_options.self_managed_qp = options.self_managed_qp;
        if (options.tos) {
          endpoint_options.type_of_service = static_cast<std::uint8_t>(*options.tos);
        }
        rping::PingOptions ping;
        ping.verbose = options.verbose;
        ping.validate = options.validate;
        ping.json = tool.common().json;
        ping.count = static_cast<std::uint64_t>(options.count);
        ping.size = options.size.value_or(options.server ? rdmakit::rping::max_payload_size
                                                         : rdmakit::rping::default_payload_size);
        if (options.server) {
          run_server(options, endpoint_options, ping, report);
          return;
        }
        const auto destination = rdmakit::parse_address(options.address, options.port);
        report.peer_address = destination.to_string();
        std::optional<rdmakit::SocketAddress> source;
        if (!options.source.empty()) {
          source = rdmakit::parse_address(options.source, 0);
        }
        rping::run_client(source ? &*source : nullptr, destination, endpoint_options, ping, report);
      });
}
