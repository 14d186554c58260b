// send_bw: a perftest-class bandwidth tool over the documented rdma_cm flow. The client's
// rdma_connect carries a versioned hello (operation, largest message, depth) and the
// server's rdma_accept answers with its buffer; then the client streams SEND, RDMA WRITE or
// RDMA READ at one size (-s) or a sweep (-a), and the server reports what arrived.

#include <optional>

#include <fmt/format.h>

#include "lib/bench.hpp"
#include "lib/cli.hpp"
#include "lib/diag_probe.hpp"
#include "lib/endpoint.hpp"

namespace {

namespace bw = rdmakit::bw;

struct Options {
  std::string server;  // empty: run as the server
  std::string bind;
  std::uint16_t port = 18515;
  std::string device;
  std::string operation = "send";
  std::uint32_t size = 65536;
  bool sweep = false;
  std::uint64_t iterations = 1000;
  std::uint64_t warmup = 100;
  std::uint32_t depth = 128;
  std::uint32_t inline_size = 64;
  std::uint32_t max_size = 64u << 20;  // server: largest buffer a client may ask for
  double accept_timeout_s = 0;
  bool gbits = false;
};

bw::Operation operation_of(const std::string& name) {
  if (name == "send") return bw::Operation::send;
  if (name == "write") return bw::Operation::write;
  if (name == "read") return bw::Operation::read;
  throw rdmakit::UsageError("--op must be send, write or read, not '" + name + "'");
}

std::vector<std::uint32_t> sizes_of(const Options& o) {
  if (!o.sweep) return {o.size};
  std::vector<std::uint32_t> sizes;
  for (std::uint32_t size = 2; size <= (8u << 20); size *= 2) sizes.push_back(size);
  return sizes;
}

nlohmann::json row_json(const rdmakit::BandwidthRow& row) {
  return {{"bytes", row.size},
          {"iterations", row.iterations},
          {"seconds", row.seconds},
          {"bw_peak_mib_per_s", row.peak_mib_per_s},
          {"bw_average_mib_per_s", row.average_mib_per_s},
          {"bw_average_gbit_per_s", row.average_gbit_per_s},
          {"message_rate_mpps", row.message_rate_mpps}};
}

std::string table(const std::vector<rdmakit::BandwidthRow>& rows, bool gbits) {
  const char* unit = gbits ? "Gb/sec" : "MB/sec";  // perftest's MB: 2^20 bytes
  std::string text =
      fmt::format(" {:>10} {:>12} {:>16} {:>19} {:>14}\n", "#bytes", "#iterations", fmt::format("BW peak[{}]", unit),
                  fmt::format("BW average[{}]", unit), "MsgRate[Mpps]");
  for (const auto& row : rows) {
    const double scale = gbits ? 1048576.0 * 8 / 1e9 : 1.0;  // MiB/s -> Gb/s
    text += fmt::format(" {:>10} {:>12} {:>16.2f} {:>19.2f} {:>14.6f}\n", row.size, row.iterations,
                        row.peak_mib_per_s * scale, row.average_mib_per_s * scale, row.message_rate_mpps);
  }
  return text;
}

// Limits the device imposes on what was asked for: exit 2 with the device's number.
void check_device_limits(ibv_context* context, std::uint8_t port, const std::string& wanted_device, std::uint32_t depth,
                         std::uint32_t largest) {
  ibv_device_attr device{};
  if (const int rc = ibv_query_device(context, &device); rc != 0) {
    throw rdmakit::RdmaError("ibv_query_device", ibv_get_device_name(context->device), rc);
  }
  ibv_port_attr port_attributes{};
  if (const int rc = ibv_query_port(context, port, &port_attributes); rc != 0) {
    throw rdmakit::RdmaError("ibv_query_port", ibv_get_device_name(context->device), rc);
  }
  const std::string name = ibv_get_device_name(context->device);
  if (!wanted_device.empty() && wanted_device != name) {
    throw rdmakit::UsageError(fmt::format("-d {}: the address is served by {}", wanted_device, name));
  }
  if (depth > static_cast<std::uint32_t>(device.max_qp_wr)) {
    throw rdmakit::UsageError(fmt::format("-t {} is above {}'s maximum queue depth {}", depth, name, device.max_qp_wr));
  }
  // One CQ takes the send and the receive completions: depth + 1 entries.
  if (depth + 1 > static_cast<std::uint32_t>(device.max_cqe)) {
    throw rdmakit::UsageError(
        fmt::format("-t {} needs {} completion queue entries; {} allows at most {} (maximum "
                    "queue depth here: {})",
                    depth, depth + 1, name, device.max_cqe, device.max_cqe - 1));
  }
  if (largest > port_attributes.max_msg_sz) {
    throw rdmakit::UsageError(
        fmt::format("-s {} is above {}'s maximum message size {}", largest, name, port_attributes.max_msg_sz));
  }
}

void finish(const Options& o, const std::vector<rdmakit::BandwidthRow>& rows, rdmakit::Report& report) {
  nlohmann::json json_rows = nlohmann::json::array();
  for (const auto& row : rows) {
    json_rows.push_back(row_json(row));
    report.bytes += row.bytes;
    report.iterations_completed += row.iterations;
  }
  report.extra["rows"] = json_rows;
  report.text = table(rows, o.gbits);
}

void run_client(const Options& o, const rdmakit::CommonOptions& common, rdmakit::Report& report) {
  const rdmakit::StopSignal stop;
  const auto operation = operation_of(o.operation);
  const auto sizes = sizes_of(o);
  const auto largest = sizes.back();
  rdmakit::EndpointOptions endpoint_options;
  endpoint_options.send_depth = o.depth;
  endpoint_options.recv_depth = 1;
  endpoint_options.responder_resources = 16;
  endpoint_options.initiator_depth = 16;
  endpoint_options.max_inline_data = operation == bw::Operation::read ? 0 : o.inline_size;
  endpoint_options.timeout = common.timeout();
  endpoint_options.stop_fd = stop.fd();
  const auto hello = bw::encode(bw::Hello{.operation = operation, .max_size = largest, .depth = o.depth});
  endpoint_options.private_data.assign(hello.begin(), hello.end());
  endpoint_options.check_device = [&](ibv_context* context, std::uint8_t port) {
    check_device_limits(context, port, o.device, o.depth, largest);
  };
  std::optional<rdmakit::SocketAddress> source;
  if (!o.bind.empty()) source = rdmakit::parse_address(o.bind, 0);
  const auto destination = rdmakit::parse_address(o.server, o.port);
  auto endpoint = rdmakit::Endpoint::resolve(source ? &*source : nullptr, destination, endpoint_options, report);
  report.local_address = endpoint->local_address();
  report.peer_address = endpoint->peer_address();
  auto& buffer = endpoint->add_buffer(largest, IBV_ACCESS_LOCAL_WRITE);
  endpoint->connect(report);
  const auto answer = bw::decode_answer(endpoint->peer_private_data());
  if (answer.length < largest) {
    throw rdmakit::ProtocolError(fmt::format("the server's buffer holds {} bytes, {} needed", answer.length, largest));
  }
  report.extra["test"] = {{"operation", o.operation},
                          {"depth", o.depth},
                          {"signal_every", rdmakit::signal_interval(o.depth)},
                          {"inline_bytes", endpoint->max_inline_data()},
                          {"warmup_iterations", o.warmup}};

  rdmakit::StreamSettings settings{.qp = endpoint->queue_pair(),
                                   .cq = endpoint->completion_queue(),
                                   .local_address = buffer.address(),
                                   .lkey = buffer.lkey(),
                                   .operation = operation,
                                   .remote_address = answer.address,
                                   .rkey = answer.rkey,
                                   .depth = o.depth,
                                   .signal_every = rdmakit::signal_interval(o.depth),
                                   .max_inline_data = endpoint->max_inline_data(),
                                   .timeout = common.timeout(),
                                   .stop_fd = stop.fd()};
  std::vector<rdmakit::BandwidthRow> rows;
  try {
    for (const auto size : sizes) {
      if (o.warmup > 0) rdmakit::stream(settings, size, o.warmup);
      rows.push_back(rdmakit::stream(settings, size, o.iterations));
    }
  } catch (...) {
    finish(o, rows, report);
    throw;
  }
  finish(o, rows, report);
  endpoint->disconnect();
}

void run_server(const Options& o, const rdmakit::CommonOptions& common, rdmakit::Report& report) {
  const rdmakit::StopSignal stop;
  rdmakit::EndpointOptions endpoint_options;
  endpoint_options.send_depth = 1;
  endpoint_options.recv_depth = o.depth;
  endpoint_options.responder_resources = 16;
  endpoint_options.initiator_depth = 16;
  endpoint_options.timeout = common.timeout();
  endpoint_options.stop_fd = stop.fd();
  endpoint_options.check_device = [&](ibv_context* context, std::uint8_t port) {
    check_device_limits(context, port, o.device, o.depth, 1);
  };
  const auto address = rdmakit::parse_address(o.bind.empty() ? "0.0.0.0" : o.bind, o.port);
  rdmakit::Listener listener(address, 1, endpoint_options);
  report.local_address = listener.local_address();
  std::optional<rdmakit::Clock::time_point> deadline;
  if (o.accept_timeout_s > 0) {
    deadline = rdmakit::Clock::now() + std::chrono::milliseconds(static_cast<long long>(o.accept_timeout_s * 1000));
  }
  auto endpoint = listener.next_request(deadline);
  report.peer_address = endpoint->peer_address();
  const auto hello = bw::decode_hello(endpoint->peer_private_data());
  if (hello.max_size > o.max_size) {
    throw rdmakit::ProtocolError(fmt::format("the client asks for {}-byte messages; this server allows {} (--max-size)",
                                             hello.max_size, o.max_size));
  }
  auto& buffer =
      endpoint->add_buffer(hello.max_size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  const auto answer =
      bw::encode(bw::Answer{.address = buffer.address(), .rkey = buffer.rkey(), .length = hello.max_size});
  endpoint->set_private_data({answer.begin(), answer.end()});
  report.extra["test"] = {
      {"operation", bw::to_string(hello.operation)}, {"client_depth", hello.depth}, {"max_size", hello.max_size}};
  std::vector<rdmakit::BandwidthRow> rows;
  rdmakit::SinkSettings settings{.qp = endpoint->queue_pair(),
                                 .cq = endpoint->completion_queue(),
                                 .address = buffer.address(),
                                 .lkey = buffer.lkey(),
                                 .length = hello.max_size,
                                 .depth = o.depth,
                                 .stop_fd = stop.fd(),
                                 .connected = [&] { return endpoint->poll_connected(); },
                                 // Receives go up before the accept: the first SEND never meets an empty queue.
                                 .posted = [&] { endpoint->accept(report); }};
  try {
    rdmakit::sink(settings, rows);
  } catch (...) {
    finish(o, rows, report);
    throw;
  }
  finish(o, rows, report);
}

}  // namespace

int main(int argc, char** argv) {
  rdmakit::ToolRunner tool(
      "send_bw", "RDMA bandwidth over rdma_cm: SEND, RDMA WRITE or READ (perftest's ib_send_bw, scriptable)", "");
  tool.enable_diagnose(rdmakit::diag::diagnose_for_tool);
  tool.enable_json_file();
  Options o;
  auto& app = tool.app();
  app.add_option("server", o.server, "Server address (client mode); without it, run as the server");
  app.add_option("-b,--bind", o.bind, "Local address (server: listen address)");
  app.add_option("-p,--port", o.port, "Port")->capture_default_str()->check(CLI::Range(1, 65535));
  app.add_option("-d,--ib-dev", o.device, "RDMA device the address must resolve to (checked)");
  app.add_option("--op", o.operation, "send, write or read")->capture_default_str();
  auto* size = app.add_option("-s,--size", o.size, "Message bytes")
                   ->capture_default_str()
                   ->check(CLI::Range(1u, bw::max_message_size));
  app.add_flag("-a,--all", o.sweep, "Sweep sizes 2 B to 8 MiB (powers of two)")->excludes(size);
  app.add_option("-n,--iters", o.iterations, "Messages per size")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
  app.add_option("--warmup", o.warmup, "Unmeasured messages before each size")->capture_default_str();
  app.add_option("-t,--tx-depth", o.depth, "Work requests in flight (server: receives posted)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  app.add_option("-I,--inline", o.inline_size, "Send messages up to this size inline (0: never)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  app.add_option("--max-size", o.max_size, "Server: largest message a client may ask for")
      ->capture_default_str()
      ->check(CLI::Range(1u, bw::max_message_size));
  app.add_option("--accept-timeout", o.accept_timeout_s, "Server: seconds to wait for a client (0 = forever)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  app.add_flag("--report-gbits", o.gbits, "Text table in Gb/s instead of MB/s");
  return tool.run(
      argc, argv, [&] { operation_of(o.operation); },
      [&](rdmakit::Report& report) {
        report.arguments = {{"server", o.server}, {"port", o.port},         {"operation", o.operation},
                            {"size", o.size},     {"sweep", o.sweep},       {"iterations", o.iterations},
                            {"depth", o.depth},   {"inline", o.inline_size}};
        report.role = o.server.empty() ? "server" : "client";
        if (o.server.empty()) {
          run_server(o, tool.common(), report);
        } else {
          report.iterations_requested = o.iterations * sizes_of(o).size();
          run_client(o, tool.common(), report);
        }
      });
}
