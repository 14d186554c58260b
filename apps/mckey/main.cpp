// mckey: rdma_cm multicast, interoperable with rdma-core's mckey. Each connection joins
// the group on its own UD QP; a receiver counts datagrams, a sender (-s) sends them. Join
// latency is measured per connection, MULTICAST_ERROR and ADDR_CHANGE events are reported,
// and a receiver whose datagrams are lost stops at the timeout with the counts so far.

#include <arpa/inet.h>

#include <cstring>
#include <optional>

#include <infiniband/ib.h>
#include <spdlog/spdlog.h>

#include "lib/core/cli.hpp"
#include "lib/probe/host_probe.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/rdma/connection_group.hpp"

namespace {

struct Options {
  std::string group;           // -m: IP multicast address
  std::string unmapped_group;  // -M: AF_IB MGID
  bool sender = false;
  std::string bind;
  std::size_t connections = 1;
  std::uint32_t count = 10;
  std::uint32_t size = 100;
  std::string port_space = "0x111";
  bool send_only = false;
  bool block_loopback = false;
  double settle_s = 3;
  double first_timeout_s = 30;
};

rdmakit::SocketAddress group_address(const Options& o) {
  if (o.unmapped_group.empty()) {
    return rdmakit::parse_address(o.group, 0);
  }
  rdmakit::SocketAddress address;
  auto* ib = reinterpret_cast<sockaddr_ib*>(&address.storage);
  ib->sib_family = AF_IB;
  if (inet_pton(AF_INET6, o.unmapped_group.c_str(), &ib->sib_addr) != 1) {
    throw rdmakit::UsageError("-M wants an MGID in IPv6 notation, e.g. ff12:401b::1, not '" + o.unmapped_group + "'");
  }
  return address;
}

std::chrono::milliseconds milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000.0));
}

// The stock sender pauses after joining so an InfiniBand subnet manager can program the
// switches before the first datagram; RoCE needs no pause (--settle 0).
void settle(double seconds, int stop_fd) {
  if (seconds <= 0) return;
  if (rdmakit::wait_readable({stop_fd}, rdmakit::Clock::now() + milliseconds(seconds))) {
    throw rdmakit::RunStopped(rdmakit::StopReason::interrupted, "interrupted while settling after the join");
  }
}

void run(const Options& o, const rdmakit::CommonOptions& common, rdmakit::Report& report) {
  const rdmakit::StopSignal stop;
  rdmakit::GroupOptions group_options;
  group_options.port_space = rdmakit::parse_port_space(o.port_space);
  group_options.connections = o.connections;
  group_options.message_count = o.count;
  group_options.message_size = o.size;
  group_options.post_receives = !o.sender;
  group_options.send_only_join = o.send_only;
  group_options.block_loopback = o.block_loopback;
  group_options.limits.timeout = common.timeout();
  group_options.first_message_timeout = milliseconds(o.first_timeout_s);  // 0: forever
  group_options.limits.stop_fd = stop.fd();

  const auto group = group_address(o);
  std::optional<rdmakit::SocketAddress> source;
  if (!o.bind.empty()) source = rdmakit::parse_address(o.bind, 0);
  rdmakit::ConnectionGroup connections(group_options);
  const rdmakit::FillReportOnExit fill(connections, report);
  report.role = o.sender ? "sender" : "receiver";
  connections.join(source ? source->get() : nullptr, group.get());
  spdlog::info("joined {} on {} connection(s)", connections.target(), o.connections);

  rdmakit::LatencyRecorder join_latency;
  for (const auto& connection : connections.connections()) {
    for (const auto& step : connection->steps()) {
      if (step.step == "join") join_latency.add(step.ended - step.started);
    }
  }
  if (const auto summary = join_latency.summary()) report.add(rdmakit::NamedValue("join_latency_us", *summary));

  if (o.count > 0) {
    if (o.sender) {
      settle(o.settle_s, stop.fd());
      connections.exchange("send", o.count, 0, "the datagrams to go out");
    } else {
      connections.exchange("receive", 0, o.count, "datagrams from the group " + connections.target());
    }
  }
  connections.leave();
}

}  // namespace

int main(int argc, char** argv) {
  rdmakit::ToolRunner tool("mckey", "rdma_cm multicast sender/receiver (interoperates with rdma-core mckey)");
  tool.enable_diagnose(rdmakit::diag::diagnose_for_tool);
  Options o;
  auto& app = tool.app();
  auto* group = app.add_option("-m,--group", o.group, "Multicast group address (IPv4 or IPv6)");
  auto* unmapped =
      app.add_option("-M,--unmapped-group", o.unmapped_group, "AF_IB multicast GID (InfiniBand only; needs -b)");
  group->excludes(unmapped);
  app.add_flag("-s,--sender", o.sender, "Send to the group instead of receiving");
  app.add_option("-b,--bind", o.bind, "Local address to bind (picks the device)");
  app.add_option("-c,--connections", o.connections, "Joins, each on its own QP")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("-C,--count", o.count, "Datagrams per connection (0: join only)")
      ->capture_default_str()
      ->check(CLI::Range(0, 16384));
  app.add_option("-S,--size", o.size, "Datagram payload bytes (at most the active MTU)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  app.add_option("-p,--port-space", o.port_space, "0x111 (UDP, default) or 0x2 (IPoIB)")->capture_default_str();
  app.add_flag("-o,--send-only", o.send_only, "Join as a send-only full member");
  app.add_flag("-l,--no-loopback", o.block_loopback, "Do not receive our own datagrams (block multicast loopback)");
  app.add_option("--settle", o.settle_s, "Sender: seconds to pause after the join before sending")
      ->capture_default_str()
      ->check(rdmakit::FiniteNumber())
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--first-timeout", o.first_timeout_s,
                 "Receiver: seconds to wait for the first datagram (0 = forever); --timeout bounds later gaps")
      ->capture_default_str()
      ->check(rdmakit::FiniteNumber())
      ->check(CLI::Range(0.0, 86400.0));
  return tool.run(
      argc, argv,
      [&] {
        if (o.group.empty() && o.unmapped_group.empty()) {
          throw rdmakit::UsageError("give the multicast group: -m ADDRESS (or -M MGID with -b)");
        }
        if (!o.unmapped_group.empty() && o.bind.empty()) {
          throw rdmakit::UsageError("-M (an unmapped AF_IB group) needs -b to pick the local port");
        }
        if (!rdmakit::is_datagram(rdmakit::parse_port_space(o.port_space))) {
          throw rdmakit::UsageError("multicast needs a datagram port space: 0x111 (UDP) or 0x2 (IPoIB)");
        }
        if (o.send_only && !o.sender) {
          throw rdmakit::UsageError("-o (send-only join) is for a sender: add -s");
        }
        // A name that resolves to nothing is a usage error even where no RDMA device is there to run on.
        rdmakit::check_resolvable(o.group);
        rdmakit::check_resolvable(o.bind);
      },
      [&](rdmakit::Report& report) {
        report.iterations_requested = static_cast<std::uint64_t>(o.count) * o.connections;
        run(o, tool.common(), report);
      });
}
