#pragma once
// send_bw --pin-core: the measuring thread on one core, and its memory on the RDMA device's
// NUMA node, read from sysfs (the device's numa_node, each node's cpulist). No RDMA
// library: files and system calls only, so the unit tests read a fixture tree.

#include <filesystem>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace rdmakit {

inline constexpr const char* sysfs_root = "/sys";

// The NUMA node sysfs gives DEVICE (class/infiniband/DEVICE/device/numa_node); nullopt
// when it has none: a software device (rxe) with no PCI function, or a machine without
// NUMA (-1).
std::optional<int> device_numa_node(const std::string& device, const std::filesystem::path& root = sysfs_root);

// The node whose cpulist (devices/system/node/nodeN/cpulist) holds CORE; nullopt when none
// does (no NUMA nodes in sysfs).
std::optional<int> core_numa_node(int core, const std::filesystem::path& root = sysfs_root);

// A cpulist ("0-3,8,10-11") as its cores; nullopt for text that is not one.
std::optional<std::set<int>> parse_cpulist(const std::string& text);

// Where a run was placed, for the report.
struct Placement {
  int core = -1;
  std::optional<int> core_node;
  std::optional<int> device_node;
  bool memory_on_device_node = false;  // the memory policy prefers the device's node
  nlohmann::json to_json() const;
};

// Throws UsageError unless this process may run on CORE (its affinity mask).
void check_core_allowed(int core);

// Pins the calling thread to CORE and, where DEVICE has a NUMA node, makes that node the
// preferred one for the memory it allocates from now on (set_mempolicy MPOL_PREFERRED), so
// the buffers registered after this land there. A core on another node than the device
// is allowed (it is a test worth running) and logged as a warning.
Placement place_on_core(int core, const std::string& device, const std::filesystem::path& root = sysfs_root);

}  // namespace rdmakit
