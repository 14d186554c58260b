#include "lib/diag/connect_session.hpp"

#include <linux/capability.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "lib/base/wait.hpp"
#include "lib/diag/connect_agent.hpp"
#include "lib/diag/connect_probe.hpp"
#include "lib/diag/connect_report.hpp"
#include "lib/rdma/cm.hpp"

namespace rdmakit::diag {

namespace {

constexpr const char* default_agent_user = "nobody";

// The agent's gate: --max-connections is its cap on probes.
constexpr GateFlags agent_gate{.local_default = true, .cap = false, .rate = true, .per_peer = false};

void add_options(CLI::App& app, ConnectOptions& o) {
  app.add_option("address", o.address, "The other host's address (the client side); with --serve, none");
  app.add_option("-p,--port", o.port, "rdma_cm port to probe (or, with --serve, to listen on)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  app.add_option("--ps", o.port_space, "Port space: tcp, udp or ib")
      ->capture_default_str()
      ->check(CLI::IsMember({"tcp", "udp", "ib"}));
  app.add_option("-b,--bind", o.bind,
                 "Client: the source address to connect from; --serve: the one address to listen on (both ports)");
  app.add_option("--gid-index", o.gid_index,
                 "The GID index the other stack is given (perftest -x, NCCL_IB_GID_INDEX, UCX_IB_GID_INDEX); "
                 "diag-connect checks it on both hosts");
  app.add_option("--agent", o.agent_host,
                 "Where the agent's side channel is, when not at ADDRESS (a management address)");
  app.add_option("--agent-port", o.agent_port, "TCP port of the agent's side channel")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  app.add_flag("--no-agent", o.no_agent, "Do not ask the other host's agent; run only this host's steps");
  app.add_flag("--serve", o.serve,
               "Be the agent: listen on rdma_cm (-p) for probes and on TCP (--agent-port) for view requests, until "
               "Ctrl-C or SIGTERM");
  app.add_flag("--no-listen", o.no_listen, "--serve without the rdma_cm listener (the side channel only)");
  app.add_option("--max-connections", o.max_connections, "--serve: probe connections held at once; more are rejected")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  o.peers.add_to(app, agent_gate);
  app.add_option("--key-file", o.key_file,
                 "The side channel's pre-shared key (a file only its user may read, mode 0600): the agent "
                 "answers only clients that prove they hold it, and the client talks only to an agent that does")
      ->type_name("FILE");
  app.add_option("--user", o.user,
                 "--serve started as root: the user to run as before it listens (default nobody; root: stay "
                 "root, with CAP_NET_ADMIN only)")
      ->type_name("NAME");
  app.add_option("--replay", o.replay_file,
                 "Diagnose a captured attempt instead of making one: a --json report or a fixture "
                 "(tests/fixtures/connect/*.json)");
}

void validate(const ConnectOptions& o) {
  if (o.serve) {
    if (!o.address.empty()) throw UsageError("--serve takes no ADDRESS; use --bind to listen on one address");
    if (!o.replay_file.empty()) throw UsageError("--serve and --replay do not go together");
    if (o.gid_index) {
      throw UsageError("--gid-index goes with a client (ADDRESS or --replay): the agent answers its whole GID table");
    }
    if (!o.bind.empty()) check_resolvable(o.bind, AF_UNSPEC, true);
    return;
  }
  if (o.no_listen) throw UsageError("--no-listen goes with --serve");
  if (!o.user.empty()) throw UsageError("--user goes with --serve");
  if (!o.peers.allow.empty()) throw UsageError("--allow goes with --serve");
  if (!o.replay_file.empty()) return;
  if (o.address.empty()) throw UsageError("ADDRESS is required (the other host), or --serve to be the agent");
  check_resolvable(o.address);
  if (!o.bind.empty()) check_resolvable(o.bind, AF_UNSPEC, true);
  if (!o.agent_host.empty()) check_resolvable(o.agent_host);
}

ConnectCase replay(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw UsageError("--replay: cannot read " + file);
  const auto document = nlohmann::json::parse(in, nullptr, false);
  if (document.is_discarded()) throw UsageError("--replay: " + file + " is not JSON");
  try {
    return connect_case_from_json(document.contains("capture") ? document["capture"] : document);
  } catch (const ProtocolError& bad) {
    throw UsageError("--replay: " + file + ": " + bad.what());
  }
}

std::string numeric(const std::string& host) {
  return host.empty() ? host : parse_address(host, 0).host_string();
}

// Started as root, the agent first becomes --user (nobody by default): uid 0 owns files that
// no capability is needed to read or write. Root is needed only to read the nftables ruleset (over netlink:
// CAP_NET_ADMIN), to bind a port below 1024 if asked to (CAP_NET_BIND_SERVICE), and for the memory the probes pin:
// without CAP_IPC_LOCK the kernel pins at most RLIMIT_MEMLOCK, so that is raised first to
// what max_connections probes register (a 64 KiB buffer and 3 receives each) with room for
// the queues a provider pins (mlx5's), above the 8 MiB a kernel gives by default.
// /dev/infiniband/rdma_cm and uverbs are open to all. The drop comes before the listeners
// open, not after: rdma_cm and uverbs refuse every command written to them with credentials
// other than those they were opened with (the kernel's ib_safe_file_access), so an agent
// that dropped after opening its rdma_cm listener had its next event refused with EACCES.
// --serve: whom an agent started as root becomes (nullopt: it stays as it started). An agent
// started as another user has nobody else to become: naming one is a usage error.
std::optional<RunAs> agent_user(const std::string& asked) {
  const std::string name = asked.empty() ? default_agent_user : asked;
  const auto user = find_user(name);
  if (!user) throw UsageError(fmt::format("--user {}: no such user on this host", name));
  if (geteuid() == 0) return user->uid == 0 ? std::nullopt : user;
  if (!asked.empty() && user->uid != geteuid()) {
    throw UsageError(fmt::format("--user {}: only an agent started as root changes user (this one runs as uid {})",
                                 name, geteuid()));
  }
  return std::nullopt;
}

void drop_root(const ConnectOptions& o) {
  constexpr std::uint64_t queues_bytes = 1024UL * 1024;
  constexpr std::uint64_t base_bytes = 8UL * 1024 * 1024;
  constexpr std::uint16_t first_unprivileged_port = 1024;
  const std::uint64_t per_probe = (4 * std::uint64_t{agent::check_buffer_bytes}) + queues_bytes;
  PrivilegeNeeds needs{
      .keep = {CAP_NET_ADMIN}, .memlock_bytes = base_bytes + (o.max_connections * per_probe), .run_as = o.run_as};
  if (o.agent_port < first_unprivileged_port || (!o.no_listen && o.port < first_unprivileged_port)) {
    needs.keep.push_back(CAP_NET_BIND_SERVICE);
  }
  const auto drop = drop_privileges(needs);
  if (drop.had_capabilities) {
    spdlog::info("{}", describe(drop));
  } else {
    spdlog::debug("{}", describe(drop));
  }
}

void serve(const ConnectOptions& o, const CommonOptions& common, Report& report) {
  report.role = "agent";
  drop_root(o);
  const StopSignal stop;
  AgentOptions agent{.bind = numeric(o.bind),
                     .probe_port = o.port,
                     .port_space = o.port_space,
                     .agent_port = o.agent_port,
                     .listen_rdma = !o.no_listen,
                     .max_connections = o.max_connections,
                     .client_timeout = common.timeout(),
                     .stop_fd = stop.fd(),
                     .view = {},
                     .key = o.key,
                     .peers = o.peers.limits(numeric(o.bind), agent_gate),
                     .siblings = report.siblings};
  if (!o.key) {
    spdlog::warn("no --key-file: anyone allowed to connect to the side channel is answered without authentication");
  }
  const auto tally = serve_agent(
      agent, [](const std::string& where) { std::cerr << where << '\n'; },
      [](const std::string& line) { spdlog::info("{}", line); });
  report.add(AgentTallyResult(tally));
  report.add(RefusedPeers(tally.refused));
}

}  // namespace

void ConnectOptions::add_to(ToolRunner& tool) {
  tool.rename_argument("ps", "port_space");
  tool.rename_argument("agent", "agent_host");
  add_options(tool.app(), *this);
}

void ConnectOptions::check() {
  validate(*this);
  if (!key_file.empty()) key = read_shared_key(key_file);
  if (serve) run_as = agent_user(user);
}

void run_diag_connect(const ConnectOptions& options, const CommonOptions& common, Report& report) {
  if (options.serve) {
    serve(options, common, report);
    return;
  }
  ConnectCase connect_case;
  if (!options.replay_file.empty()) {
    connect_case = replay(options.replay_file);
    // Another index on the same capture: what the tables say of it.
    if (options.gid_index) connect_case.attempt.gid_index = options.gid_index;
  } else {
    report.role = "client";
    const StopSignal stop;
    ConnectProbeOptions probe{.target = numeric(options.address),
                              .port = options.port,
                              .port_space = options.port_space,
                              .bind = numeric(options.bind),
                              .agent_host = numeric(options.agent_host),
                              .agent_port = options.agent_port,
                              .ask_agent = !options.no_agent,
                              .limits = {.stop_fd = stop.fd(), .timeout = common.timeout()},
                              .view = {},
                              .key = options.key,
                              .siblings = report.siblings};
    connect_case = probe_connect(probe);
    connect_case.attempt.gid_index = options.gid_index;
  }
  add_connect_result(std::move(connect_case), report);
}

}  // namespace rdmakit::diag
