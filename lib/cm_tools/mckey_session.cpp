#include "lib/cm_tools/mckey_session.hpp"

#include <chrono>
#include <cstring>
#include <optional>

#include <infiniband/ib.h>
#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"
#include "lib/base/stats.hpp"
#include "lib/base/wait.hpp"
#include "lib/cm_tools/group_report.hpp"
#include "lib/net/ip_address.hpp"
#include "lib/rdma/addressing.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/rdma/connection_group.hpp"
#include "lib/tool/cli_checks.hpp"

namespace rdmakit {

void MckeyOptions::add_to(ToolRunner& tool) {
  auto& app = tool.app();
  auto* group_option = app.add_option("-m,--group", group, "Multicast group address (IPv4 or IPv6)");
  auto* unmapped =
      app.add_option("-M,--unmapped-group", unmapped_group, "AF_IB multicast GID (InfiniBand only; needs -b)");
  group_option->excludes(unmapped);
  app.add_flag("-s,--sender", sender, "Send to the group instead of receiving");
  app.add_option("-b,--bind", bind, "Local address to bind (picks the device)");
  app.add_option("-c,--connections", connections, "Joins, each on its own QP")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("-C,--count", count, "Datagrams per connection (0: join only)")
      ->capture_default_str()
      ->check(CLI::Range(0, 16384));
  app.add_option("-S,--size", size, "Datagram payload bytes (at most the active MTU)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  app.add_option("-p,--port-space", port_space, "0x111 (UDP, default) or 0x2 (IPoIB)")->capture_default_str();
  app.add_flag("-o,--send-only", send_only, "Join as a send-only full member");
  app.add_flag("-l,--no-loopback", block_loopback, "Do not receive our own datagrams (block multicast loopback)");
  app.add_option("--settle", settle_s, "Sender: seconds to pause after the join before sending")
      ->capture_default_str()
      ->check(FiniteNumber())
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--first-timeout", first_timeout_s,
                 "Receiver: seconds to wait for the first datagram (0 = forever); --timeout bounds later gaps")
      ->capture_default_str()
      ->check(FiniteNumber())
      ->check(CLI::Range(0.0, 86400.0));
}

void MckeyOptions::check() const {
  if (group.empty() && unmapped_group.empty()) {
    throw UsageError("give the multicast group: -m ADDRESS (or -M MGID with -b)");
  }
  if (!unmapped_group.empty() && bind.empty()) {
    throw UsageError("-M (an unmapped AF_IB group) needs -b to pick the local port");
  }
  if (!is_datagram(parse_port_space(port_space))) {
    throw UsageError("multicast needs a datagram port space: 0x111 (UDP) or 0x2 (IPoIB)");
  }
  if (send_only && !sender) {
    throw UsageError("-o (send-only join) is for a sender: add -s");
  }
  // A name that resolves to nothing is a usage error even where no RDMA device is there to run on.
  check_resolvable(group);
  check_resolvable(bind);
}

namespace {

SocketAddress group_address(const MckeyOptions& o) {
  if (o.unmapped_group.empty()) {
    return parse_address(o.group, 0);
  }
  SocketAddress address;
  auto* ib = reinterpret_cast<sockaddr_ib*>(&address.storage);
  ib->sib_family = AF_IB;
  const auto mgid = IpAddress::parse(o.unmapped_group, MappedAddress::kept);
  if (!mgid || mgid->family != AF_INET6) {
    throw UsageError("-M wants an MGID in IPv6 notation, e.g. ff12:401b::1, not '" + o.unmapped_group + "'");
  }
  std::memcpy(&ib->sib_addr, mgid->bytes.data(), sizeof ib->sib_addr);
  return address;
}

std::chrono::milliseconds milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000.0));
}

// The stock sender pauses after joining so an InfiniBand subnet manager can program the
// switches before the first datagram; RoCE needs no pause (--settle 0).
void settle(double seconds, int stop_fd) {
  if (seconds <= 0) return;
  if (wait_readable({stop_fd}, Clock::now() + milliseconds(seconds))) {
    throw RunStopped(StopReason::interrupted, "interrupted while settling after the join");
  }
}

GroupOptions group_options(const MckeyOptions& o, const CommonOptions& common, int stop_fd) {
  GroupOptions options;
  options.port_space = parse_port_space(o.port_space);
  options.connections = o.connections;
  options.message_count = o.count;
  options.message_size = o.size;
  options.post_receives = !o.sender;
  options.send_only_join = o.send_only;
  options.block_loopback = o.block_loopback;
  options.limits.timeout = common.timeout();
  options.first_message_timeout = milliseconds(o.first_timeout_s);  // 0: forever
  options.limits.stop_fd = stop_fd;
  return options;
}

void add_join_latency(const ConnectionGroup& connections, Report& report) {
  LatencyRecorder join_latency;
  for (const auto& connection : connections.connections()) {
    for (const auto& step : connection->steps()) {
      if (step.step == Step::join) join_latency.add(step.ended - step.started);
    }
  }
  if (const auto summary = join_latency.summary()) report.add(NamedValue("join_latency_us", *summary));
}

}  // namespace

void run_mckey(const MckeyOptions& o, const CommonOptions& common, Report& report) {
  report.iterations_requested = static_cast<std::uint64_t>(o.count) * o.connections;
  const StopSignal stop;
  const auto group = group_address(o);
  std::optional<SocketAddress> source;
  if (!o.bind.empty()) source = parse_address(o.bind, 0);
  ConnectionGroup connections(group_options(o, common, stop.fd()));
  const FillReportOnExit fill(connections, report);
  report.role = o.sender ? "sender" : "receiver";
  connections.join(source ? source->get() : nullptr, group.get());
  spdlog::info("joined {} on {} connection(s)", connections.target(), o.connections);
  add_join_latency(connections, report);

  if (o.count > 0) {
    if (o.sender) {
      settle(o.settle_s, stop.fd());
      connections.exchange(Step::send, o.count, 0, "the datagrams to go out");
    } else {
      connections.exchange(Step::receive, 0, o.count, "datagrams from the group " + connections.target());
    }
  }
  connections.leave();
}

}  // namespace rdmakit
