#pragma once
// Reads the kernel's view of RDMA devices, verbs char devices, modules and netdevs from a
// sysfs tree. The root is a parameter so that tests can point it at a fixture tree.

#include <filesystem>
#include <optional>
#include <string>

#include "lib/base/text_file.hpp"  // read_first_line, for the readers of sysfs here
#include "lib/diag/diagnosis.hpp"

namespace rdmakit::diag {

// Fills kernel_devices (without netlink indices), modules, netdevs (without addresses) and
// rdma_core_present. Missing files leave fields empty; nothing here throws for a bad tree.
void read_sysfs(const std::filesystem::path& root, Inventory& inventory);

// Which of the RDMA modules `kernel` (uname -r) could load, from its modules.dep and
// modules.builtin under `modules_root` (/lib/modules); none where neither file exists, as
// for a kernel whose modules are not installed (modprobe finds nothing there either).
KernelModules read_kernel_modules(const std::filesystem::path& modules_root, const std::string& kernel);

}  // namespace rdmakit::diag
