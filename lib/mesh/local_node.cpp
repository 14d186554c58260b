#include "lib/mesh/local_node.hpp"

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/diag/address_choice.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/rdma/gid.hpp"

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

// The port's GID table, as advise_gid takes it: the one port the address resolved to.
std::vector<GidPort> gid_table(const Inventory& inventory, const std::string& device, int port) {
  for (const auto& kernel : inventory.kernel_devices) {
    if (kernel.name != device) continue;
    for (const auto& each : kernel.ports) {
      if (each.number == port) return {GidPort{.device = device, .port = port, .gids = each.gids}};
    }
  }
  return {};
}

// rdma_mesh's own verdict where a rank's host is fine but has no address to try: in
// diag-bind's form, with a cause diag-bind never gives (it is always given an address), the
// report schema's no_address_verdict.
nlohmann::json no_address_verdict(const std::string& problem) {
  auto verdict = to_json(Verdict{.cause = "unknown",
                                 .exit_code = ExitCode::cause_found,
                                 .summary = problem,
                                 .fix = {},
                                 .next = "give the address with --bind, or the netdev with --netdev",
                                 .details = {},
                                 .warnings = {}});
  verdict["cause"] = "no_address";
  return verdict;
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
    auto verdict = diagnose(target, inventory, run_attempt(target, options), options.siblings);
    node.verdict = verdict.exit_code == ExitCode::ok ? no_address_verdict(choice.problem) : to_json(verdict);
    return node;
  }
  const auto host = parse_address(choice.address, 0).host_string();
  node.address = host;
  const auto target = make_target(host, 0, "tcp");
  const auto attempt = run_attempt(target, options);
  const auto verdict = diagnose(target, inventory, attempt, options.siblings);
  node.device = attempt.device;
  node.port = attempt.port;
  node.usable = verdict.exit_code == ExitCode::ok;
  if (!node.usable) node.verdict = to_json(verdict);
  node.mtu = active_mtu(inventory, attempt.device, attempt.port);
  // The entry that holds the address, RoCE v2 before RoCE v1: the one rdma_cm binds to. None
  // for InfiniBand (no address GIDs) or when the table lacks it.
  const auto advice = advise_gid(gid_table(inventory, attempt.device, attempt.port), host);
  if (advice.entry) {
    node.gid = advice.entry->gid;
    node.gid_index = static_cast<int>(advice.entry->index);
    node.gid_type = advice.entry->type;
  }
  return node;
}

}  // namespace rdmakit::diag
