#pragma once
// The live side of the diagnoser: reads this host (sysfs, RDMA netlink, libibverbs, /dev,
// rlimits, interface addresses) and makes the real attempt with librdmacm, exactly as the
// tools do. lib/diag/diagnosis.hpp turns what this returns into a verdict.

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "lib/base/wait.hpp"
#include "lib/diag/diagnosis.hpp"

namespace rdmakit::diag {

struct ProbeOptions {
  std::filesystem::path sysfs_root = "/sys";
  // Bounds address and route resolution; Ctrl-C (the stop fd) ends their waits early.
  RunLimits limits{.stop_fd = -1, .timeout = std::chrono::milliseconds(2000)};
  std::size_t registration_bytes = 1 << 20;  // size of the memory-registration probe
  SiblingNames siblings;                     // how the verdict's next steps name diag-bind
};

Inventory collect_inventory(const ProbeOptions& options);

// Device name -> kernel index, from RDMA netlink's device dump (what ibv_get_device_index
// reads); nullopt when the dump failed (without the RDMA core there is no NETLINK_RDMA).
std::optional<std::map<std::string, int>> rdma_device_indices();

Attempt run_attempt(const Target& target, const ProbeOptions& options);

// The source address the kernel's routing picks toward `numeric_host` (no packet is sent);
// "" when it has no route.
std::string source_toward(const std::string& numeric_host);

// Everything at once, for the in-process --diagnose of the other tools. `address` may be a
// host name; an unresolvable one becomes a verdict, not an exception.
Diagnosis diagnose_address(const std::string& address, const ProbeOptions& options);

}  // namespace rdmakit::diag
