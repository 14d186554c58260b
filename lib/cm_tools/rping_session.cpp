#include "lib/cm_tools/rping_session.hpp"

#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "lib/cm_tools/messages.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/rdma/endpoint.hpp"
#include "lib/tool/persistent.hpp"

namespace rdmakit {

namespace wire = rping;

namespace {

// What the two roles need of the flags.
struct RpingRoleSettings {
  bool verbose = false;     // print each ping's data
  bool validate = false;    // compare what came back with what was sent
  bool json = false;        // verbose lines go to stderr so stdout stays one JSON document
  std::uint32_t size = 64;  // client: payload size; server: largest payload accepted
  std::uint64_t count = 0;  // client: iterations, 0 = until Ctrl-C
};

constexpr int remote_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
constexpr std::uint64_t receive_id = 1;

// The control messages of one connection: one receive slot, one send slot.
struct ControlBuffers {
  RegisteredBuffer& receive;
  RegisteredBuffer& send;

  explicit ControlBuffers(Endpoint& endpoint)
      : receive(endpoint.add_buffer(wire::advert_wire_size, IBV_ACCESS_LOCAL_WRITE)),
        send(endpoint.add_buffer(wire::advert_wire_size, 0)) {}
};

// Waits for the completion of `wanted`, passing over our own SEND completions. A RECV is
// checked for the advert size and the slot reposted before the bytes are returned to use.
ibv_wc await_completion(Endpoint& endpoint, ibv_wc_opcode wanted) {
  for (;;) {
    const ibv_wc wc = endpoint.next_completion();
    if (wc.opcode == IBV_WC_SEND && wanted != IBV_WC_SEND) {
      continue;
    }
    if (wc.opcode != wanted) {
      throw ProtocolError(fmt::format("expected a {} completion, got {}", opcode_name(wanted), opcode_name(wc.opcode)));
    }
    if (wc.opcode == IBV_WC_RECV && wc.byte_len != wire::advert_wire_size) {
      throw ProtocolError(
          fmt::format("peer sent a {}-byte message; rping messages are {} bytes", wc.byte_len, wire::advert_wire_size));
    }
    return wc;
  }
}

wire::BufferAdvert receive_advert(Endpoint& endpoint, ControlBuffers& control) {
  await_completion(endpoint, IBV_WC_RECV);
  const auto advert = wire::decode_advert(control.receive.bytes());
  endpoint.post_receive(control.receive, wire::advert_wire_size, receive_id);
  spdlog::debug("peer advertised addr {:#x} rkey {:#x} len {}", advert.address, advert.rkey, advert.length);
  return advert;
}

// The go-ahead's content is not read by either side; we send zeros.
void send_message(Endpoint& endpoint, ControlBuffers& control, const wire::AdvertBytes& bytes) {
  std::memcpy(control.send.data(), bytes.data(), bytes.size());
  endpoint.post_send(control.send, bytes.size(), 0);
}

void print_data(const RpingRoleSettings& options, const char* prefix, const RegisteredBuffer& buffer,
                std::size_t length) {
  const auto text = std::string_view(buffer.chars(), strnlen(buffer.chars(), length));
  (options.json ? std::cerr : std::cout) << prefix << text << '\n';
}

void run_rping_client(const SocketAddress* source, const SocketAddress& destination,
                      const EndpointOptions& endpoint_options, const RpingRoleSettings& options, Report& report) {
  auto endpoint = Endpoint::resolve(source, destination, endpoint_options, report.step_events());
  report.local_address = endpoint->local_address();
  ControlBuffers control(*endpoint);
  RegisteredBuffer& outgoing = endpoint->add_buffer(options.size, remote_access);  // the server reads this
  RegisteredBuffer& incoming = endpoint->add_buffer(options.size, remote_access);  // the server writes here
  endpoint->post_receive(control.receive, wire::advert_wire_size, receive_id);
  endpoint->connect(report.step_events());

  LatencyRecorder rtt;
  rtt.reserve(options.count == 0 ? 1024 : options.count);
  try {
    for (std::uint64_t iteration = 0; options.count == 0 || iteration < options.count; ++iteration) {
      wire::fill_ping_payload(std::span(outgoing.chars(), outgoing.size()), iteration);
      if (options.validate) {
        std::memset(incoming.data(), 0, incoming.size());
      }
      const auto started = Clock::now();
      send_message(*endpoint, control, wire::encode({outgoing.address(), outgoing.rkey(), options.size}));
      await_completion(*endpoint, IBV_WC_RECV);  // server has read our data
      endpoint->post_receive(control.receive, wire::advert_wire_size, receive_id);
      send_message(*endpoint, control, wire::encode({incoming.address(), incoming.rkey(), options.size}));
      await_completion(*endpoint, IBV_WC_RECV);  // server has written it back
      endpoint->post_receive(control.receive, wire::advert_wire_size, receive_id);
      rtt.add(Clock::now() - started);

      if (options.validate && std::memcmp(outgoing.data(), incoming.data(), options.size) != 0) {
        throw ProtocolError(fmt::format("data mismatch in iteration {}", iteration));
      }
      if (options.verbose) {
        print_data(options, "ping data: ", incoming, incoming.size());
      }
      report.iterations_completed = iteration + 1;
      report.bytes += 2ULL * options.size;
    }
  } catch (const RunStopped& stopped) {
    report.rtt = rtt.summary();
    if (stopped.reason() == StopReason::interrupted && options.count == 0) {
      report.outcome = Outcome::interrupted;  // the only way to end an unlimited run
      return;
    }
    throw;
  } catch (...) {
    report.rtt = rtt.summary();
    throw;
  }
  report.rtt = rtt.summary();
  endpoint->disconnect();
}

void serve_rping_connection(Endpoint& endpoint, const RpingRoleSettings& options, Report& report,
                            ServedConnection& served) {
  served.peer = endpoint.peer_address();
  ControlBuffers control(endpoint);
  RegisteredBuffer& data = endpoint.add_buffer(options.size, remote_access);
  endpoint.post_receive(control.receive, wire::advert_wire_size, receive_id);
  endpoint.accept(report.step_events());
  spdlog::info("client {} connected", served.peer);

  const wire::AdvertBytes go_ahead{};
  bool mid_iteration = false;
  try {
    for (;;) {
      mid_iteration = false;
      const auto source = receive_advert(endpoint, control);
      mid_iteration = true;
      wire::check_advert_fits(source, data.size(), "the RDMA READ of its ping data");
      endpoint.post_rdma(IBV_WR_RDMA_READ, data, source.length, source.address, source.rkey, 0);
      await_completion(endpoint, IBV_WC_RDMA_READ);
      if (options.verbose) {
        print_data(options, "server ping data: ", data, source.length);
      }
      send_message(endpoint, control, go_ahead);

      const auto sink = receive_advert(endpoint, control);
      const auto echo = wire::echo_length(std::span<const char>(data.chars(), source.length));
      if (sink.length < echo) {
        throw ProtocolError(fmt::format("peer advertised a {}-byte sink for a {}-byte echo", sink.length, echo));
      }
      endpoint.post_rdma(IBV_WR_RDMA_WRITE, data, echo, sink.address, sink.rkey, 0);
      await_completion(endpoint, IBV_WC_RDMA_WRITE);
      send_message(endpoint, control, go_ahead);
      served.iterations += 1;
      served.bytes += source.length + echo;
    }
  } catch (const RunStopped& stopped) {
    if (stopped.reason() != StopReason::peer_disconnected) {
      throw;
    }
    // The server's job ends when its client leaves; leaving mid-iteration is the client's
    // failure to report (it was interrupted or lost), not ours.
    spdlog::info("client {} disconnected {} after {} iterations", served.peer,
                 mid_iteration ? "mid-iteration" : "between iterations", served.iterations);
  }
}

void run_rping_server(const RpingOptions& o, const EndpointOptions& endpoint_options, const RpingRoleSettings& ping,
                      Report& report) {
  const auto bind_to = parse_address(o.address.empty() ? "0.0.0.0" : o.address, o.port);
  Listener listener(bind_to, o.persistent ? 64 : 1, endpoint_options);
  report.local_address = listener.local_address();
  const auto gate = std::make_shared<PeerGate>(o.gate_limits(o.address));
  listener.admit_through(gate);
  const RefusalsToReport refusals(gate, report);
  auto idle_deadline = [&]() -> std::optional<Clock::time_point> {
    const auto wait = o.accept_timeout();
    if (!wait) return std::nullopt;
    return Clock::now() + *wait;
  };
  const auto deadline = idle_deadline();

  if (!o.persistent) {
    auto endpoint = listener.next_request(deadline);
    report.peer_address = endpoint->peer_address();
    serve_counted([&](ServedConnection& served) { serve_rping_connection(*endpoint, ping, report, served); }, report);
    return;
  }

  // --accept-timeout is how long a persistent server stays up without a new client.
  serve_each_client(
      [&] {
        auto endpoint = listener.next_request(idle_deadline());
        return ConnectionRequest<Endpoint>{endpoint->peer_address(), std::move(endpoint)};
      },
      [&ping](Endpoint& endpoint, Report& connection_report, ServedConnection& served) {
        serve_rping_connection(endpoint, ping, connection_report, served);
      },
      report);
}

}  // namespace

void RpingOptions::add_to(ToolRunner& tool) {
  CLI::App& app = tool.app();
  app.add_flag("-s,--server", server, "Run as server");
  app.add_flag("-c,--client", client, "Run as client");
  app.add_option("-a,--address", address, "Server address (client: where to connect; server: where to listen)");
  app.add_option("-I,--source", source, "Client: source address to bind to");
  app.add_option("-p,--port", port, "Port")->capture_default_str()->check(CLI::Range(1, 65535));
  app.add_option("-C,--count", count, "Client: ping this many times (0 = until Ctrl-C)")
      ->capture_default_str()
      ->check(CLI::Range(0, std::numeric_limits<int>::max()));
  app.add_option("-S,--size", size, "Ping data size (client default 64; server: largest accepted, default 65535)");
  app.add_flag("-v,--verbose", verbose, "Print ping data");
  app.add_flag("-V,--validate", validate, "Validate ping data");
  ServerOptions::add_to(app, "Server: keep serving, one thread per connection",
                        "Server: seconds to wait for a client, with -P for each next one (0 = forever)",
                        per_client_gate);
  app.add_flag("-q,--self-qp", self_managed_qp, "Create the QP with ibv_create_qp and drive its states ourselves");
  app.add_option("-t,--tos", tos, "Type of service for the connection")->check(CLI::Range(0, 255));
}

void RpingOptions::check() const {
  if (server == client) {
    throw UsageError("choose exactly one of -s (server) and -c (client)");
  }
  if (client && address.empty()) {
    throw UsageError("the client needs the server address: -a ADDRESS");
  }
  if (server && !source.empty()) {
    throw UsageError("-I (source address) is for the client; the server listens on -a");
  }
  if (client && persistent) {
    throw UsageError("-P (persistent) is a server option");
  }
  if (size && (*size < wire::min_payload_size || *size > wire::max_payload_size)) {
    throw UsageError(fmt::format("-S {} is outside the valid range {} to {}", *size, wire::min_payload_size,
                                 wire::max_payload_size));
  }
  // A name that resolves to nothing is a usage error even where no RDMA device is there to run on.
  check_resolvable(address);
  check_resolvable(source);
}

void run_rping(const RpingOptions& options, const CommonOptions& common, Report& report) {
  report.role = options.server ? "server" : "client";
  report.iterations_requested = options.server ? 0 : static_cast<std::uint64_t>(options.count);

  const StopSignal stop;
  EndpointOptions endpoint_options;
  endpoint_options.limits.timeout = common.timeout();
  endpoint_options.limits.stop_fd = stop.fd();
  endpoint_options.self_managed_qp = options.self_managed_qp;
  if (options.tos) {
    endpoint_options.type_of_service = static_cast<std::uint8_t>(*options.tos);
  }
  RpingRoleSettings ping;
  ping.verbose = options.verbose;
  ping.validate = options.validate;
  ping.json = common.json;
  ping.count = static_cast<std::uint64_t>(options.count);
  ping.size = options.size.value_or(options.server ? wire::max_payload_size : wire::default_payload_size);
  if (options.server) {
    run_rping_server(options, endpoint_options, ping, report);
    return;
  }
  const auto destination = parse_address(options.address, options.port);
  report.peer_address = destination.to_string();
  std::optional<SocketAddress> source;
  if (!options.source.empty()) {
    source = parse_address(options.source, 0);
  }
  run_rping_client(source ? &*source : nullptr, destination, endpoint_options, ping, report);
}

}  // namespace rdmakit
