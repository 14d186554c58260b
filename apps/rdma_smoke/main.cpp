// rdma_smoke: the suite as one smoke test. Each tool's server and client run as child
// processes on one address (loopback through the RDMA device), or across two hosts
// (--serve on one, --peer on the other), each case bounded in time; the results come as a
// table, a JSON report and JUnit XML for CI test reporters. The session lives in
// lib/smoke/smoke_session; this file hands it the host's side (addresses, listeners,
// routes), which needs the RDMA and diag folders that lib/smoke does not include.

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/diag/address_choice.hpp"
#include "lib/diag/cm_listeners.hpp"
#include "lib/diag/host_probe.hpp"
#include "lib/diag/routes.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/smoke/smoke_session.hpp"
#include "lib/tool/cli.hpp"

namespace {

std::string numeric(const std::string& host) {
  return rdmakit::parse_address(host, 0).host_string();
}

bool listening_on(std::uint16_t port, pid_t pid) {
  rdmakit::diag::HostView view;
  if (!rdmakit::diag::read_cm_listeners(view)) return false;
  return std::ranges::any_of(view.listeners, [port, pid](const rdmakit::diag::CmListener& l) {
    return l.port == port && l.pid == static_cast<std::uint32_t>(pid);
  });
}

std::optional<std::vector<std::string>> port_addresses() {
  const auto inventory = rdmakit::diag::collect_inventory(rdmakit::diag::ProbeOptions{});
  if (inventory.kernel_devices.empty()) return std::nullopt;
  std::vector<std::string> addresses;
  for (const auto& choice : rdmakit::diag::every_port_address(inventory)) addresses.push_back(choice.address);
  return addresses;
}

std::string route_source(const std::string& peer) {
  return rdmakit::diag::route_to(peer, "").source;
}

}  // namespace

int main(int argc, char** argv) {
  rdmakit::ToolRunner runner("rdma_smoke", "Run the rdmakit tools as one smoke test: does RDMA work on this host?");
  // Its tools connect and measure, each in its own report; its cases are counted in "smoke".
  runner.report_groups({.connection = false, .measurement = false});
  rdmakit::smoke::SmokeOptions options;
  options.add_to(runner);
  const rdmakit::smoke::SmokeHost host{
      .numeric = numeric, .listening = listening_on, .port_addresses = port_addresses, .route_source = route_source};
  return runner.run(
      argc, argv, [&] { options.check(runner, host); },
      [&](rdmakit::Report& report) { rdmakit::smoke::run_smoke(options, runner, host, report); });
}
