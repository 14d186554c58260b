#include "lib/bench/ping_session.hpp"

#include <cstdio>
#include <cstring>
#include <iostream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lib/wire/protocol.hpp"

namespace rping {

using rdmakit::Endpoint;
using rdmakit::ProtocolError;
using rdmakit::RegisteredBuffer;
namespace wire = rdmakit::rping;

namespace {

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
      throw ProtocolError(fmt::format("expected a {} completion, got {}", rdmakit::opcode_name(wanted),
                                      rdmakit::opcode_name(wc.opcode)));
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

void print_data(const PingOptions& options, const char* prefix, const RegisteredBuffer& buffer, std::size_t length) {
  const auto text = std::string_view(buffer.chars(), strnlen(buffer.chars(), length));
  (options.json ? std::cerr : std::cout) << prefix << text << '\n';
}

}  // namespace

void run_client(const rdmakit::SocketAddress* source, const rdmakit::SocketAddress& destination,
                const rdmakit::EndpointOptions& endpoint_options, const PingOptions& options, rdmakit::Report& report) {
  auto endpoint = Endpoint::resolve(source, destination, endpoint_options, report);
  report.local_address = endpoint->local_address();
  ControlBuffers control(*endpoint);
  RegisteredBuffer& outgoing = endpoint->add_buffer(options.size, remote_access);  // the server reads this
  RegisteredBuffer& incoming = endpoint->add_buffer(options.size, remote_access);  // the server writes here
  endpoint->post_receive(control.receive, wire::advert_wire_size, receive_id);
  endpoint->connect(report);

  rdmakit::LatencyRecorder rtt;
  rtt.reserve(options.count == 0 ? 1024 : options.count);
  try {
    for (std::uint64_t iteration = 0; options.count == 0 || iteration < options.count; ++iteration) {
      wire::fill_ping_payload(std::span(outgoing.chars(), outgoing.size()), iteration);
      if (options.validate) {
        std::memset(incoming.data(), 0, incoming.size());
      }
      const auto started = rdmakit::Clock::now();
      send_message(*endpoint, control, wire::encode({outgoing.address(), outgoing.rkey(), options.size}));
      await_completion(*endpoint, IBV_WC_RECV);  // server has read our data
      endpoint->post_receive(control.receive, wire::advert_wire_size, receive_id);
      send_message(*endpoint, control, wire::encode({incoming.address(), incoming.rkey(), options.size}));
      await_completion(*endpoint, IBV_WC_RECV);  // server has written it back
      endpoint->post_receive(control.receive, wire::advert_wire_size, receive_id);
      rtt.add(rdmakit::Clock::now() - started);

      if (options.validate && std::memcmp(outgoing.data(), incoming.data(), options.size) != 0) {
        throw ProtocolError(fmt::format("data mismatch in iteration {}", iteration));
      }
      if (options.verbose) {
        print_data(options, "ping data: ", incoming, incoming.size());
      }
      report.iterations_completed = iteration + 1;
      report.bytes += 2ULL * options.size;
    }
  } catch (const rdmakit::RunStopped& stopped) {
    report.rtt = rtt.summary();
    if (stopped.reason() == rdmakit::StopReason::interrupted && options.count == 0) {
      report.outcome = rdmakit::Outcome::interrupted;  // the only way to end an unlimited run
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

void serve_connection(Endpoint& endpoint, const PingOptions& options, rdmakit::Report& report,
                      rdmakit::ServedConnection& served) {
  served.peer = endpoint.peer_address();
  ControlBuffers control(endpoint);
  RegisteredBuffer& data = endpoint.add_buffer(options.size, remote_access);
  endpoint.post_receive(control.receive, wire::advert_wire_size, receive_id);
  endpoint.accept(report);
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
  } catch (const rdmakit::RunStopped& stopped) {
    if (stopped.reason() != rdmakit::StopReason::peer_disconnected) {
      throw;
    }
    // The server's job ends when its client leaves; leaving mid-iteration is the client's
    // failure to report (it was interrupted or lost), not ours.
    spdlog::info("client {} disconnected {} after {} iterations", served.peer,
                 mid_iteration ? "mid-iteration" : "between iterations", served.iterations);
  }
}

}  // namespace rping
