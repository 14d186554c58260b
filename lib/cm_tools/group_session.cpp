#include "lib/cm_tools/group_session.hpp"

#include <infiniband/ib.h>

#include <spdlog/spdlog.h>

#include "lib/base/wait.hpp"
#include "lib/cm_tools/group_report.hpp"
#include "lib/rdma/addressing.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/tool/cli_checks.hpp"

namespace rdmakit {

namespace {

// A connection group's gate: --allow and --peer-rate; its -c is its cap.
constexpr GateFlags group_gate{.local_default = false, .cap = false, .rate = true, .per_peer = false};

}  // namespace

void ConnectionFlags::add_to(ToolRunner& tool, const std::string& count_help, std::uint32_t max_size,
                             const std::string& size_help) {
  auto& app = tool.app();
  tool.rename_argument("address-format", "format");
  app.add_option("-s,--server", server, "Server address (client mode); without it, run as the server");
  app.add_option("-b,--bind", bind, "Local address to bind (server: listen address)");
  app.add_option("-f,--address-format", format, "How to read addresses: name, ip, ipv6 or gid")->capture_default_str();
  app.add_option("-c,--connections", connections, "Connections, set up concurrently (both sides must agree)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("-C,--count", count, count_help)->capture_default_str()->check(CLI::Range(0, 16384));
  app.add_option("-S,--size", size, size_help)->capture_default_str()->check(CLI::Range(1U, max_size));
  app.add_option("-t,--tos", type_of_service, "Type of service")->check(CLI::Range(0, 255));
  app.add_option("--accept-timeout", accept_timeout_s, "Server: seconds to wait for the first client (0 = forever)")
      ->capture_default_str()
      ->check(FiniteNumber())
      ->check(CLI::Range(0.0, 86400.0));
  peers.add_to(app, group_gate);
}

void ConnectionFlags::check(rdma_port_space port_space) const {
  const auto hints = addressing_hints(format, port_space);
  // rdma_getaddrinfo reads a GID (-f gid) as an IPv6 address.
  const int family = hints.ai_family == AF_IB ? AF_INET6 : hints.ai_family;
  const bool numeric = (hints.ai_flags & RAI_NUMERICHOST) != 0;
  check_resolvable(server, family, numeric);
  check_resolvable(bind, family, numeric);
}

GroupOptions ConnectionFlags::group_options(rdma_port_space port_space, const CommonOptions& common,
                                            int stop_fd) const {
  GroupOptions options;
  options.port_space = port_space;
  options.connections = connections;
  options.message_count = count;
  options.message_size = size;
  if (type_of_service) options.type_of_service = static_cast<std::uint8_t>(*type_of_service);
  options.limits.timeout = common.timeout();
  options.accept_timeout = std::chrono::milliseconds(static_cast<long long>(accept_timeout_s * 1000));
  options.limits.stop_fd = stop_fd;
  if (is_server()) options.gate = std::make_shared<PeerGate>(peers.limits(bind, group_gate));
  return options;
}

void establish(ConnectionGroup& group, const ConnectionFlags& flags, rdma_port_space port_space, Report& report) {
  const auto addresses = lookup_addresses(flags.bind, flags.server, std::to_string(flags.port),
                                          addressing_hints(flags.format, port_space));
  if (flags.is_server()) {
    report.role = "server";
    group.listen(addresses->get()->ai_src_addr);
    spdlog::info("listening on {}", group.local_address());
    group.accept();
  } else {
    report.role = "client";
    group.connect(*addresses->get());
  }
}

void run_group_session(const ConnectionFlags& flags, rdma_port_space port_space, const CommonOptions& common,
                       Report& report, const std::function<void(GroupOptions&)>& adjust,
                       const GroupExchange& exchange) {
  // The port space in effect, by name, whichever spelling chose it.
  report.arguments["port_space"] = port_space_name(port_space);
  report.iterations_requested = static_cast<std::uint64_t>(flags.count) * flags.connections;
  const StopSignal stop;
  auto options = flags.group_options(port_space, common, stop.fd());
  if (adjust) adjust(options);
  ConnectionGroup group(options);
  const FillReportOnExit fill(group, report);
  std::optional<RefusalsToReport> refusals;
  if (options.gate) refusals.emplace(options.gate, report);
  establish(group, flags, port_space, report);
  exchange(group, report);
}

}  // namespace rdmakit
