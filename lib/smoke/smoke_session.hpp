#pragma once
// rdma_smoke's session: the suite as one smoke test. Each tool's server and client run as
// child processes on one address (loopback through the RDMA device), or across two hosts
// (--serve on one, --peer on the other), each case bounded in time; the results go into the
// report (lib/smoke/smoke_report) and, with --junit, a JUnit XML file.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lib/base/report.hpp"
#include "lib/smoke/remote.hpp"
#include "lib/tool/cli.hpp"

namespace rdmakit::smoke {

// What the session needs from the host, given by the app so that this layer needs no RDMA.
struct SmokeHost {
  // The address `host` names, numeric; throws UsageError for a name that resolves to nothing.
  std::function<std::string(const std::string& host)> numeric;
  // Whether process `pid` has an rdma_cm id listening on `port` (RunEnvironment::listening).
  std::function<bool(std::uint16_t port, pid_t pid)> listening;
  // Every RDMA port's address; nullopt when the host has no RDMA device at all.
  std::function<std::optional<std::vector<std::string>>()> port_addresses;
  // The local address the kernel routes to `peer` (numeric) from.
  std::function<std::string(const std::string& peer)> route_source;
};

struct SmokeOptions {
  std::vector<std::string> addresses;
  std::uint16_t first_port = 19400;
  std::vector<std::string> tools;
  std::vector<std::string> skip;
  bool quick = false;
  double case_seconds = 60;
  std::string junit_file;
  std::string tools_dir;
  bool serve = false;
  std::string peer;
  std::string direction = "both";
  std::uint16_t control_port = default_control_port;
  double accept_seconds = 600;
  std::string key_file;  // --key-file, with --serve or --peer
  GateOptions peers;     // --allow, with --serve: the control port's peers (default: its local subnets)

  // Registers rdma_smoke's arguments and flags and the --help footer on exit codes.
  void add_to(ToolRunner& runner);
  // Throws UsageError for unknown tool names, addresses that name nothing, more than one
  // address with --serve or --peer, a --key-file without either or that read_shared_key
  // refuses, or no tools in --tools-dir.
  void check(const ToolRunner& runner, const SmokeHost& host) const;
};

// Runs the cases (this host alone, --serve or --peer) and fills the report: the cases,
// exit 77 with nothing to test, a failure for a failed case or a lost peer. Writes --junit.
void run_smoke(const SmokeOptions& options, const ToolRunner& runner, const SmokeHost& host, Report& report);

}  // namespace rdmakit::smoke
