#pragma once
// One host's view for diag-connect, read live: diag-bind's inventory mapped into the view
// (lib/diag/host_view_read.hpp), the files beside sysfs, the nftables ruleset (through
// libnftables, where the build found it), rdma_cm's listeners (lib/diag/cm_listeners.hpp),
// and the kernel's route and neighbour entry for an address (rtnetlink). Read-only.

#include <filesystem>
#include <string>
#include <vector>

#include "lib/diag/connect_diagnosis.hpp"
#include "lib/diag/routes.hpp"

namespace rdmakit::diag {

struct HostViewOptions {
  std::filesystem::path sysfs_root = "/sys";
  std::filesystem::path procfs_root = "/proc";
  std::filesystem::path configfs_root = "/sys/kernel/config";
  bool read_firewall = true;
};

// Everything but the route and the neighbour, which depend on the peer. Never throws for
// what it cannot read: that stays unknown (-1, "", listeners_known false, firewall not
// readable with the reason).
HostView read_host_view(const HostViewOptions& options);

// The nftables ruleset's rules that touch UDP 4791 (lib/diag/host_view_read.hpp). Not
// readable, with the reason, without permission (CAP_NET_ADMIN) or without libnftables.
Firewall read_firewall();

}  // namespace rdmakit::diag
