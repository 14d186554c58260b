// rdma_client: the synchronous librdmacm flow of rdma_cm(7) (rdma_getaddrinfo,
// rdma_create_ep, rdma_reg_msgs, rdma_post_recv, rdma_connect, rdma_post_send,
// rdma_get_send_comp, rdma_get_recv_comp, rdma_disconnect), interoperable with rdma-core's
// rdma_server, with every wait bounded, per-step timings and round-trip times.

#include <limits>

#include "lib/core/cli.hpp"
#include "lib/probe/host_probe.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/rdma/sync_endpoint.hpp"
#include "lib/wire/protocol.hpp"

namespace {

namespace rdmx = rdmakit::rdmx;

struct Options {
  std::string server = "127.0.0.1";
  std::string port = rdmx::default_port;
  std::uint32_t count = 1;
  bool no_inline = false;
};

void run_client(const Options& o, const rdmakit::CommonOptions& common, rdmakit::Report& report) {
  const rdmakit::StopSignal stop;
  auto bounds = [&](std::string what) { return rdmakit::within(common.timeout(), stop.fd(), std::move(what)); };
  rdmakit::StepTimer timer(report);
  const rdmakit::AddrInfo info(o.server, o.port, false);
  timer.lap("getaddrinfo");
  ibv_qp_init_attr attributes{};
  // Resolves address and route and creates the QP.
  auto endpoint = rdmakit::create_message_endpoint(info, o.no_inline ? 0 : rdmx::message_size, attributes);
  timer.lap("create_ep");
  report.local_address = rdmakit::address_of(rdma_get_local_addr(endpoint.get())).to_string();
  report.peer_address = rdmakit::address_of(rdma_get_peer_addr(endpoint.get())).to_string();
  rdmakit::MessageBuffers<rdmx::message_size> messages(
      endpoint, !o.no_inline && attributes.cap.max_inline_data >= rdmx::message_size);
  report.add(rdmakit::NamedValue("inline_send", messages.sends_inline()));
  timer.lap("reg_msgs");
  messages.post_recv();
  endpoint.connect(bounds("the connection to " + report.peer_address));
  timer.lap("connect");

  rdmakit::LatencyRecorder rtt;
  rtt.reserve(o.count);
  try {
    for (std::uint32_t i = 0; i < o.count; ++i) {
      if (i > 0) messages.post_recv();
      rdmx::encode_remaining(messages.send_buffer(), o.count - 1 - i);
      const auto started = rdmakit::Clock::now();
      messages.post_send();
      endpoint.send_completion(bounds("the send completion"));
      rdmx::check_message_length(endpoint.recv_completion(bounds("the server's reply")).byte_len);
      rtt.add(rdmakit::Clock::now() - started);
      report.iterations_completed = i + 1;
      report.bytes += 2 * rdmx::message_size;
    }
  } catch (...) {
    report.rtt = rtt.summary();
    throw;
  }
  report.rtt = rtt.summary();
  timer.lap("exchanges");
  endpoint.disconnect(bounds("the disconnect"));
  timer.lap("disconnect");
}

}  // namespace

int main(int argc, char** argv) {
  rdmakit::ToolRunner tool("rdma_client", "Synchronous rdma_cm client (interoperates with rdma-core rdma_server)");
  tool.enable_diagnose(rdmakit::diag::diagnose_for_tool);
  Options options;
  auto& app = tool.app();
  app.add_option("-s,--server", options.server, "Server address or name")->capture_default_str();
  app.add_option("-p,--port", options.port, "Server port")->capture_default_str()->check(CLI::Range(1, 65535));
  app.add_option("-C,--count", options.count, "Exchanges on the connection (a stock rdma_server answers one)")
      ->capture_default_str()
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  app.add_flag("--no-inline", options.no_inline, "Send from registered memory even where inline sends work");
  return tool.run(
      argc, argv,
      // rdma_getaddrinfo needs an RDMA device before it looks at the name at all.
      [&] { rdmakit::check_resolvable(options.server); },
      [&](rdmakit::Report& report) {
        report.role = "client";
        report.arguments = {{"server", options.server}, {"port", options.port}, {"count", options.count}};
        report.iterations_requested = options.count;
        run_client(options, tool.common(), report);
      });
}
