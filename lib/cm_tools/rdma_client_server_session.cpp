#include "lib/cm_tools/rdma_client_server_session.hpp"

#include <limits>
#include <memory>

#include <CLI/CLI.hpp>

#include "lib/base/stats.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/rdma/sync_endpoint.hpp"
#include "lib/tool/persistent.hpp"

namespace rdmakit {

namespace {

// Accepts `connection` and answers each of the client's messages with the same bytes, until
// the one that says no more follow; then disconnects.
void serve_client(SyncEndpoint& connection, const EchoServerOptions& o, std::chrono::milliseconds timeout, int stop_fd,
                  Report& report, ServedConnection& served) {
  auto bounds = [&](std::string what) { return within(timeout, stop_fd, std::move(what)); };
  StepTimer timer(Step::reg_msgs);  // from the request on: waiting for a client is no step
  MessageBuffers<echo::message_size> messages(connection,
                                              !o.no_inline && connection.max_inline_data() >= echo::message_size);
  report.add(NamedValue("inline_send", messages.sends_inline()));
  report.add_timing(timer.next(Step::accept));
  messages.post_recv();
  connection.accept(bounds("the connection to be established"));
  report.add_timing(timer.next(Step::transfer));
  report.add(NamedValue("rnr_nak_timer", connection.rnr_nak_timer()));

  for (;;) {
    echo::check_message_length(connection.recv_completion(bounds("a message from the client")).byte_len);
    const auto remaining = echo::decode_remaining(messages.received());
    if (remaining > 0) messages.post_recv();  // before replying, so the next message finds it
    messages.send_buffer() = messages.received();
    messages.post_send();
    connection.send_completion(bounds("the reply's send completion"));
    ++served.iterations;
    served.bytes += 2 * echo::message_size;
    if (remaining == 0) break;
  }
  report.add_timing(timer.next(Step::disconnect));
  connection.disconnect(bounds("the disconnect"));
  report.add_timing(timer.span());
}

}  // namespace

void EchoClientOptions::add_to(ToolRunner& tool) {
  auto& app = tool.app();
  app.add_option("-s,--server", server, "Server address or name")->capture_default_str();
  app.add_option("-p,--port", port, "Server port")->capture_default_str()->check(CLI::Range(1, 65535));
  app.add_option("-C,--count", count, "Exchanges on the connection (a stock rdma_server answers one)")
      ->capture_default_str()
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  app.add_flag("--no-inline", no_inline, "Send from registered memory even where inline sends work");
}

// rdma_getaddrinfo needs an RDMA device before it looks at the name at all.
void EchoClientOptions::check() const {
  check_resolvable(server);
}

void EchoServerOptions::add_to(ToolRunner& tool) {
  auto& app = tool.app();
  app.add_option("-s,--server", server, "Address to listen on")->capture_default_str();
  app.add_option("-p,--port", port, "Port to listen on")->capture_default_str()->check(CLI::Range(1, 65535));
  ServerOptions::add_to(app, "Keep serving clients, each on a thread of its own",
                        "Seconds to wait for a client, with -P for each next one (0 = forever)", per_client_gate);
  app.add_flag("--no-inline", no_inline, "Send from registered memory even where inline sends work");
}

void EchoServerOptions::check() const {
  check_resolvable(server);
}

void run_rdma_client(const EchoClientOptions& o, std::chrono::milliseconds timeout, Report& report) {
  report.role = "client";
  report.iterations_requested = o.count;
  const StopSignal stop;
  auto bounds = [&](std::string what) { return within(timeout, stop.fd(), std::move(what)); };
  StepTimer timer(Step::getaddrinfo);
  const AddrInfo info(o.server, std::to_string(o.port), false);
  report.add_timing(timer.next(Step::create_ep));
  ibv_qp_init_attr attributes{};
  // Resolves address and route and creates the QP.
  auto endpoint = create_message_endpoint(info, o.no_inline ? 0 : echo::message_size, attributes);
  report.add_timing(timer.next(Step::reg_msgs));
  report.local_address = address_of(rdma_get_local_addr(endpoint.get())).to_string();
  report.peer_address = address_of(rdma_get_peer_addr(endpoint.get())).to_string();
  MessageBuffers<echo::message_size> messages(endpoint,
                                              !o.no_inline && attributes.cap.max_inline_data >= echo::message_size);
  report.add(NamedValue("inline_send", messages.sends_inline()));
  report.add_timing(timer.next(Step::connect));
  messages.post_recv();
  endpoint.connect(bounds("the connection to " + report.peer_address));
  report.add_timing(timer.next(Step::transfer));
  report.add(NamedValue("rnr_nak_timer", endpoint.rnr_nak_timer()));

  LatencyRecorder rtt;
  rtt.reserve(o.count);
  try {
    for (std::uint32_t i = 0; i < o.count; ++i) {
      if (i > 0) messages.post_recv();
      echo::encode_remaining(messages.send_buffer(), o.count - 1 - i);
      const auto started = Clock::now();
      messages.post_send();
      endpoint.send_completion(bounds("the send completion"));
      echo::check_message_length(endpoint.recv_completion(bounds("the server's reply")).byte_len);
      rtt.add(Clock::now() - started);
      report.iterations_completed = i + 1;
      report.bytes += 2 * echo::message_size;
    }
  } catch (...) {
    report.rtt = rtt.summary();
    throw;
  }
  report.rtt = rtt.summary();
  report.add_timing(timer.next(Step::disconnect));
  endpoint.disconnect(bounds("the disconnect"));
  report.add_timing(timer.span());
}

void run_rdma_server(const EchoServerOptions& o, std::chrono::milliseconds timeout, Report& report) {
  report.role = "server";
  const StopSignal stop;
  StepTimer timer(Step::getaddrinfo);
  const AddrInfo info(o.server, std::to_string(o.port), true);
  report.add_timing(timer.next(Step::listen));
  auto attributes = message_qp_attributes(o.no_inline ? 0 : echo::message_size);
  SyncEndpoint listener(info, &attributes);  // its QP attributes serve each accepted connection
  listener.listen(o.persistent ? 64 : 0);
  const auto gate = std::make_shared<PeerGate>(o.gate_limits(o.server));
  listener.admit_through(gate);
  const RefusalsToReport refusals(gate, report);
  report.add_timing(timer.span());
  report.local_address = address_of(rdma_get_local_addr(listener.get())).to_string();
  // For a persistent server: how long it stays up without a new client.
  auto accept_bounds = [&] {
    const auto deadline =
        o.accept_timeout_s > 0
            ? Clock::now() + std::chrono::milliseconds(static_cast<long long>(o.accept_timeout_s * 1000))
            : Clock::time_point::max();
    return Bounds{deadline, stop.fd(), "a connection request"};
  };

  if (o.persistent) {
    serve_each_client(
        [&] {
          auto connection = std::make_unique<SyncEndpoint>(listener.get_request(accept_bounds()));
          auto peer = address_of(rdma_get_peer_addr(connection->get())).to_string();
          return ConnectionRequest<SyncEndpoint>{std::move(peer), std::move(connection)};
        },
        [&](SyncEndpoint& connection, Report& connection_report, ServedConnection& served) {
          serve_client(connection, o, timeout, stop.fd(), connection_report, served);
        },
        report);
    return;
  }
  auto connection = listener.get_request(accept_bounds());
  report.peer_address = address_of(rdma_get_peer_addr(connection.get())).to_string();
  serve_counted([&](ServedConnection& served) { serve_client(connection, o, timeout, stop.fd(), report, served); },
                report);
}

}  // namespace rdmakit
