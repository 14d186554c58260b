#include "lib/probe/local_node.hpp"

#include <algorithm>

#include "lib/diag/address_choice.hpp"
#include "lib/rdma/cm.hpp"

namespace rdmakit::diag {

namespace {

// The port's active MTU as libibverbs reports it, 0 when unknown.
int active_mtu(const Inventory& inventory, const std::string& device, int port) {
  for (const auto& user : inventory.user_devices) {
    if (user.name != device) continue;
    for (const auto& each : user.ports) {
      if (each.number == port) return each.active_mtu;
    }
  }
  return 0;
}

// The RoCE GID that carries the address, "" for InfiniBand or when the table lacks it.
std::string gid_of(const Inventory& inventory, const std::string& device, int port, const std::string& host) {
  const auto wanted = gid_for_address(host);
  for (const auto& kernel : inventory.kernel_devices) {
    if (kernel.name != device) continue;
    for (const auto& each : kernel.ports) {
      if (each.number != port) continue;
      const auto found =
          std::find_if(each.gids.begin(), each.gids.end(), [&](const GidEntry& entry) { return entry.gid == wanted; });
      if (found != each.gids.end()) return found->gid;
    }
  }
  return {};
}

}  // namespace

mesh::Node describe_local_node(const std::string& bind, const std::string& netdev, const std::string& device,
                               const ProbeOptions& options) {
  mesh::Node node;
  const auto inventory = collect_inventory(options);
  AddressChoice choice{.address = bind, .how = "--bind", .problem = {}};
  if (bind.empty()) choice = choose_address(inventory, netdev, device);
  node.address_choice = choice.how;
  if (choice.address.empty()) {
    // No address to try: the host's own state says why, or, where it has nothing to say
    // (devices fine, no address on them), the choice does.
    const auto target = make_target("", 0, "tcp");
    auto verdict = diagnose(target, inventory, run_attempt(target, options));
    if (verdict.exit_code == ExitCode::ok) {
      verdict = Verdict{.cause = "no_address",
                        .exit_code = ExitCode::cause_found,
                        .summary = choice.problem,
                        .fix = {},
                        .next = "give the address with --bind, or the netdev with --netdev",
                        .details = {},
                        .warnings = {}};
    }
    node.verdict = to_json(verdict);
    return node;
  }
  const auto host = parse_address(choice.address, 0).host_string();
  node.address = host;
  const auto target = make_target(host, 0, "tcp");
  const auto attempt = run_attempt(target, options);
  const auto verdict = diagnose(target, inventory, attempt);
  node.device = attempt.device;
  node.port = attempt.port;
  node.usable = verdict.exit_code == ExitCode::ok;
  if (!node.usable) node.verdict = to_json(verdict);
  node.mtu = active_mtu(inventory, attempt.device, attempt.port);
  node.gid = gid_of(inventory, attempt.device, attempt.port, host);
  return node;
}

}  // namespace rdmakit::diag
