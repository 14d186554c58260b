#include "lib/cm_tools/ucmatose_session.hpp"

#include <cstdint>

#include <CLI/CLI.hpp>

#include "lib/base/error.hpp"
#include "lib/base/wait.hpp"
#include "lib/rdma/addressing.hpp"

namespace rdmakit {

void UcmatoseOptions::add_to(ToolRunner& tool) {
  auto& app = tool.app();
  flags.add_to(tool, "Messages each way per connection (0: connect only)", 1U << 30, "Message bytes");
  app.add_option("-P,--port-space", port_space, "tcp or ib")->capture_default_str();
  app.add_option("-p,--port", flags.port, "Service port")->capture_default_str()->check(CLI::Range(1, 65535));
  app.add_flag("-m,--migrate", migrate, "Move every cm_id to a new event channel before disconnecting");
  app.add_option("-a,--ack-timeout", ack_timeout, "Local ACK timeout exponent (4.096 us * 2^N)")
      ->check(CLI::Range(0, 31));
}

rdma_port_space UcmatoseOptions::connected_port_space() const {
  const auto space = parse_port_space(port_space);
  if (is_datagram(space)) {
    throw UsageError("ucmatose needs a connected port space (tcp or ib), not " + port_space);
  }
  return space;
}

void UcmatoseOptions::check() const {
  flags.check(connected_port_space());
}

namespace {

// Receives were posted before connecting, so both sides may send at once; a stock client
// waits for the server's messages before it answers, which this also serves.
void ucmatose_transfer(const UcmatoseOptions& options, ConnectionGroup& group, Report& report) {
  const auto& flags = options.flags;
  if (flags.count > 0) {
    group.exchange(Step::transfer, flags.count, flags.count,
                   flags.is_server() ? "the clients' messages" : "the server's messages");
  }
  if (options.migrate) {
    const auto started = Clock::now();
    group.migrate();
    report.add(NamedValue("migrate_ms", elapsed_ms(started)));
  }
  if (flags.is_server()) {
    group.disconnect();
  } else {
    group.await_disconnect();
  }
}

}  // namespace

void run_ucmatose(const UcmatoseOptions& options, const CommonOptions& common, Report& report) {
  const auto adjust = [&options](GroupOptions& group_options) {
    if (options.ack_timeout) group_options.ack_timeout = static_cast<std::uint8_t>(*options.ack_timeout);
  };
  run_group_session(options.flags, options.connected_port_space(), common, report, adjust,
                    [&options](ConnectionGroup& group, Report& r) { ucmatose_transfer(options, group, r); });
}

}  // namespace rdmakit
