#pragma once
// Reads the kernel's view of RDMA devices, verbs char devices, modules and netdevs from a
// sysfs tree. The root is a parameter so that tests can point it at a fixture tree.

#include <filesystem>
#include <optional>
#include <string>

#include "lib/diag/diagnosis.hpp"

namespace rdmakit::diag {

// Fills kernel_devices (without netlink indices), modules, netdevs (without addresses) and
// rdma_core_present. Missing files leave fields empty; nothing here throws for a bad tree.
void read_sysfs(const std::filesystem::path& root, Inventory& inventory);

// The first line of a sysfs, procfs or configfs attribute without its trailing newline;
// nullopt when it is missing or unreadable (sysfs answers EINVAL for GID attributes of
// unused table entries).
std::optional<std::string> read_first_line(const std::filesystem::path& file);

}  // namespace rdmakit::diag
