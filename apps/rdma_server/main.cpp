// rdma_server: the synchronous librdmacm flow of rdma_cm(7) on the passive side
// (rdma_getaddrinfo with RAI_PASSIVE, rdma_create_ep, rdma_listen, rdma_get_request,
// rdma_reg_msgs, rdma_post_recv, rdma_accept, rdma_get_recv_comp, rdma_post_send,
// rdma_get_send_comp, rdma_disconnect), interoperable with rdma-core's rdma_client.

#include <memory>

#include "lib/core/cli.hpp"
#include "lib/core/persistent.hpp"
#include "lib/probe/host_probe.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/rdma/sync_endpoint.hpp"
#include "lib/wire/protocol.hpp"

namespace {

namespace rdmx = rdmakit::rdmx;

struct Options {
  std::string server = "0.0.0.0";
  std::string port = rdmx::default_port;
  double accept_timeout_s = 0;
  bool no_inline = false;
  bool persistent = false;
};

// Accepts `connection` and answers each of the client's messages with the same bytes, until
// the one that says no more follow; then disconnects.
void serve_client(rdmakit::SyncEndpoint& connection, const Options& o, const rdmakit::CommonOptions& common,
                  int stop_fd, rdmakit::Report& report, rdmakit::ServedConnection& served) {
  auto bounds = [&](std::string what) { return rdmakit::within(common.timeout(), stop_fd, std::move(what)); };
  rdmakit::StepTimer timer(report);  // from the request on: waiting for a client is not a CM step
  rdmakit::MessageBuffers<rdmx::message_size> messages(
      connection, !o.no_inline && connection.max_inline_data() >= rdmx::message_size);
  report.add(rdmakit::NamedValue("inline_send", messages.sends_inline()));
  timer.lap("reg_msgs");
  messages.post_recv();
  connection.accept(bounds("the connection to be established"));
  timer.lap("accept");

  for (;;) {
    rdmx::check_message_length(connection.recv_completion(bounds("a message from the client")).byte_len);
    const auto remaining = rdmx::decode_remaining(messages.received());
    if (remaining > 0) messages.post_recv();  // before replying, so the next message finds it
    messages.send_buffer() = messages.received();
    messages.post_send();
    connection.send_completion(bounds("the reply's send completion"));
    ++served.iterations;
    served.bytes += 2 * rdmx::message_size;
    if (remaining == 0) break;
  }
  timer.lap("exchanges");
  connection.disconnect(bounds("the disconnect"));
  timer.lap("disconnect");
}

void run_server(const Options& o, const rdmakit::CommonOptions& common, rdmakit::Report& report) {
  const rdmakit::StopSignal stop;
  rdmakit::StepTimer timer(report);
  const rdmakit::AddrInfo info(o.server, o.port, true);
  timer.lap("getaddrinfo");
  auto attributes = rdmakit::message_qp_attributes(o.no_inline ? 0 : rdmx::message_size);
  rdmakit::SyncEndpoint listener(info, &attributes);  // its QP attributes serve each accepted connection
  listener.listen(o.persistent ? 64 : 0);
  timer.lap("listen");
  report.local_address = rdmakit::address_of(rdma_get_local_addr(listener.get())).to_string();
  // For a persistent server: how long it stays up without a new client.
  auto accept_bounds = [&] {
    const auto deadline =
        o.accept_timeout_s > 0
            ? rdmakit::Clock::now() + std::chrono::milliseconds(static_cast<long long>(o.accept_timeout_s * 1000))
            : rdmakit::Clock::time_point::max();
    return rdmakit::Bounds{deadline, stop.fd(), "a connection request"};
  };

  if (o.persistent) {
    rdmakit::serve_persistently(
        [&]() -> rdmakit::AcceptedConnection {
          auto connection = std::make_shared<rdmakit::SyncEndpoint>(listener.get_request(accept_bounds()));
          return {rdmakit::address_of(rdma_get_peer_addr(connection->get())).to_string(),
                  [connection, &o, &common, stop_fd = stop.fd()](rdmakit::ServedConnection& served) {
                    rdmakit::Report connection_report;  // steps of one connection; the server reports totals
                    serve_client(*connection, o, common, stop_fd, connection_report, served);
                  }};
        },
        report);
    return;
  }
  auto connection = listener.get_request(accept_bounds());
  report.peer_address = rdmakit::address_of(rdma_get_peer_addr(connection.get())).to_string();
  rdmakit::serve_counted(
      [&](rdmakit::ServedConnection& served) { serve_client(connection, o, common, stop.fd(), report, served); },
      report);
}

}  // namespace

int main(int argc, char** argv) {
  rdmakit::ToolRunner tool("rdma_server", "Synchronous rdma_cm server (interoperates with rdma-core rdma_client)");
  tool.enable_diagnose(rdmakit::diag::diagnose_for_tool);
  Options options;
  auto& app = tool.app();
  app.add_option("-s,--server", options.server, "Address to listen on")->capture_default_str();
  app.add_option("-p,--port", options.port, "Port to listen on")->capture_default_str()->check(CLI::Range(1, 65535));
  app.add_option("--accept-timeout", options.accept_timeout_s,
                 "Seconds to wait for a client, with -P for each next one (0 = forever)")
      ->capture_default_str()
      ->check(rdmakit::FiniteNumber())
      ->check(CLI::Range(0.0, 86400.0));
  app.add_flag("-P,--persistent", options.persistent, "Keep serving clients, each on a thread of its own");
  app.add_flag("--no-inline", options.no_inline, "Send from registered memory even where inline sends work");
  return tool.run(
      argc, argv,
      // rdma_getaddrinfo needs an RDMA device before it looks at the name at all.
      [&] { rdmakit::check_resolvable(options.server); },
      [&](rdmakit::Report& report) {
        report.role = "server";
        report.arguments = {{"server", options.server}, {"port", options.port}, {"persistent", options.persistent}};
        run_server(options, tool.common(), report);
      });
}
