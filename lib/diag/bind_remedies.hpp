#pragma once
// What diag-bind tells the operator to do about a verdict, with this host's names filled in: a
// command that fixes it here, or the next step; and the warnings it adds whatever the verdict.
// The verdicts themselves are in diagnosis.cpp.

#include <string>
#include <string_view>
#include <vector>

#include "lib/diag/diagnosis.hpp"

namespace rdmakit::diag {

// A command that fixes it here, and/or the next step.
struct Remedy {
  std::string fix;
  std::string next;
};

Remedy command(std::string fix, std::string next = {});
Remedy next_step(std::string next);

// A loopback address's way out: one of the addresses RDMA serves here, checked the same way.
std::string loopback_instead(const Inventory& inventory);

// No device at all: load the modules and make a soft-RoCE device where this kernel has them,
// or say that it has none (a kernel without RDMA, as in many containers and cloud images).
Remedy no_device_remedy(const Inventory& inventory);

// ulimit raises the soft limit as far as the hard one; beyond it, only the limits files do.
Remedy memlock_remedy(const Memlock& m);

bool module_loaded(const Inventory& inventory, std::string_view module);

// Soft-RoCE on an Ethernet netdev; for any other, an address on an RDMA netdev; not where the
// NIC has RoCE switched off, or is EFA.
Remedy rxe_remedy(const Inventory& inventory, const Netdev& netdev);

// What user space cannot reach: the uverbs nodes of the kernel's devices.
struct UverbsReach {
  std::vector<std::string> hidden;        // one line per device user space cannot reach
  std::vector<std::string> absent_nodes;  // in this mount namespace: a container's
  std::vector<std::string> closed_nodes;  // there, but not for this user
  bool without_uverbs = false;            // a device has no uverbs device at all
};
UverbsReach uverbs_reach(const Inventory& inventory);
Remedy uverbs_remedy(const UverbsReach& reach);

// Whether the GID table has room for one more entry.
enum class Room { none, some, unknown };

// The kernel adds a GID when an address is added: re-adding the address is the fix where the
// table has room and the delete takes nothing else with it.
Remedy gid_missing_remedy(const Netdev& netdev, const std::string& address, const std::string& device, Room room);

// Warnings, whatever the verdict: a low memlock limit, devices the kernel's and libibverbs'
// views disagree on.
void add_warnings(const Inventory& inventory, Verdict& v);

}  // namespace rdmakit::diag
