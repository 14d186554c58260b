#pragma once
// rping's session: its flags, their checks, and the two roles over one Endpoint, speaking
// rdma-core rping's wire protocol (see lib/cm_tools/messages.hpp). Both roles fill the report as
// they go and never print results; -v prints each ping's data (on stderr with --json, so
// stdout stays one JSON document).

#include <cstdint>
#include <optional>
#include <string>

#include "lib/base/report.hpp"
#include "lib/cm_tools/messages.hpp"
#include "lib/tool/cli.hpp"

namespace rdmakit {

// The server flags (-P, --accept-timeout) come from ServerOptions.
struct RpingOptions : ServerOptions {
  bool server = false;
  bool client = false;
  std::string address;
  std::string source;
  std::uint16_t port = rping::default_port;
  std::int64_t count = 0;
  std::optional<std::uint32_t> size;
  bool verbose = false;
  bool validate = false;
  bool self_managed_qp = false;
  std::optional<int> tos;

  // Registers rping's flags, in rdma-core rping's letters.
  void add_to(ToolRunner& tool);
  // Throws UsageError for what cannot work; no RDMA needed.
  void check() const;
};

// The client connects and pings -C times (0: until Ctrl-C, a normal end); the server
// accepts one client, or with -P one after another, and echoes until each disconnects
// between iterations.
void run_rping(const RpingOptions& options, const CommonOptions& common, Report& report);

}  // namespace rdmakit
