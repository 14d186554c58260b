#pragma once
// diag-connect's options and its two roles: the client, which makes the attempt step by step
// and asks the other host's agent for its view, and the agent (--serve), which answers.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "lib/base/report.hpp"
#include "lib/diag/agent_protocol.hpp"
#include "lib/diag/privileges.hpp"
#include "lib/net/peer_gate.hpp"
#include "lib/net/shared_key.hpp"
#include "lib/tool/cli.hpp"

namespace rdmakit::diag {

struct ConnectOptions {
  std::string address;
  std::uint16_t port = agent::default_probe_port;
  std::string port_space = "tcp";
  std::string bind;
  std::optional<std::uint32_t> gid_index;
  std::string agent_host;
  std::uint16_t agent_port = agent::default_agent_port;
  bool no_agent = false;
  bool serve = false;
  bool no_listen = false;
  std::size_t max_connections = 4;
  // --serve: who is answered; the local subnets of the listening address by default, and at
  // most 60 new connections a peer in 10 s (a client makes 2 to 4).
  GateOptions peers{.allow = {}, .max_clients = 0, .peer_rate = 60, .max_per_peer = {}};
  std::string key_file;
  std::optional<SharedKey> key;  // read from key_file once the options check out
  std::string replay_file;
  std::string user;             // --user; "" is the default, nobody
  std::optional<RunAs> run_as;  // --serve as root: whom it becomes

  // Registers diag-connect's flags, and the report's names for those whose long name is not
  // its key.
  void add_to(ToolRunner& tool);
  // Throws UsageError for what cannot work; reads --key-file and, for --serve, finds whom the
  // agent becomes.
  void check();
};

// The client's diagnosis (or a --replay's), or the agent until Ctrl-C or SIGTERM.
void run_diag_connect(const ConnectOptions& options, const CommonOptions& common, Report& report);

}  // namespace rdmakit::diag
