// rdma_server: the synchronous librdmacm flow of rdma_cm(7) on the passive side
// (rdma_getaddrinfo with RAI_PASSIVE, rdma_create_ep, rdma_listen, rdma_get_request,
// rdma_reg_msgs, rdma_post_recv, rdma_accept, rdma_get_recv_comp, rdma_post_send,
// rdma_get_send_comp, rdma_disconnect), interoperable with rdma-core's rdma_client.

#include "lib/cli.hpp"
#include "lib/cm.hpp"
#include "lib/diag_probe.hpp"
#include "lib/protocol.hpp"
#include "lib/sync_endpoint.hpp"

namespace {

namespace rdmx = rdmakit::rdmx;

struct Options {
  std::string server = "0.0.0.0";
  std::string port = rdmx::default_port;
  double accept_timeout_s = 0;
  bool no_inline = false;
};

void run_server(const Options& o, const rdmakit::CommonOptions& common, rdmakit::Report& report) {
  const rdmakit::StopSignal stop;
  auto bounds = [&](std::string what) { return rdmakit::within(common.timeout(), stop.fd(), std::move(what)); };
  rdmakit::StepTimer timer(report);
  const rdmakit::AddrInfo info(o.server, o.port, true);
  timer.lap("getaddrinfo");
  auto attributes = rdmakit::message_qp_attributes(o.no_inline ? 0 : rdmx::message_size);
  rdmakit::SyncEndpoint listener(info, &attributes);  // its QP attributes serve each accepted connection
  listener.listen(0);
  timer.lap("listen");
  report.local_address = rdmakit::address_of(rdma_get_local_addr(listener.get())).to_string();
  const auto accept_deadline =
      o.accept_timeout_s > 0
          ? rdmakit::Clock::now() + std::chrono::milliseconds(static_cast<long long>(o.accept_timeout_s * 1000))
          : rdmakit::Clock::time_point::max();
  auto connection = listener.get_request({accept_deadline, stop.fd(), "a connection request"});
  timer.restart();  // waiting for a client is not a CM step
  report.peer_address = rdmakit::address_of(rdma_get_peer_addr(connection.get())).to_string();
  rdmakit::MessageBuffers<rdmx::message_size> messages(
      connection, !o.no_inline && connection.max_inline_data() >= rdmx::message_size);
  report.extra["inline_send"] = messages.sends_inline();
  timer.lap("reg_msgs");
  messages.post_recv();
  connection.accept(bounds("the connection to be established"));
  timer.lap("accept");

  for (;;) {
    connection.recv_completion(bounds("a message from the client"));
    const auto remaining = rdmx::decode_remaining(messages.received());
    if (remaining > 0) messages.post_recv();  // before replying, so the next message finds it
    messages.send_buffer() = messages.received();
    messages.post_send();
    connection.send_completion(bounds("the reply's send completion"));
    ++report.iterations_completed;
    report.bytes += 2 * rdmx::message_size;
    if (remaining == 0) break;
  }
  timer.lap("exchanges");
  connection.disconnect(bounds("the disconnect"));
  timer.lap("disconnect");
}

}  // namespace

int main(int argc, char** argv) {
  rdmakit::ToolRunner tool("rdma_server", "Synchronous rdma_cm server (interoperates with rdma-core rdma_client)");
  tool.enable_diagnose(rdmakit::diag::diagnose_for_tool);
  Options options;
  auto& app = tool.app();
  app.add_option("-s,--server", options.server, "Address to listen on")->capture_default_str();
  app.add_option("-p,--port", options.port, "Port to listen on")->capture_default_str()->check(CLI::Range(1, 65535));
  app.add_option("--accept-timeout", options.accept_timeout_s, "Seconds to wait for a client (0 = forever)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  app.add_flag("--no-inline", options.no_inline, "Send from registered memory even where inline sends work");
  return tool.run(
      argc, argv,
      // rdma_getaddrinfo needs an RDMA device before it looks at the name at all.
      [&] { rdmakit::check_resolvable(options.server); },
      [&](rdmakit::Report& report) {
        report.role = "server";
        report.arguments = {{"server", options.server}, {"port", options.port}};
        run_server(options, tool.common(), report);
      });
}
