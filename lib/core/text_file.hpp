#pragma once
// One-line attribute files (sysfs, procfs, configfs), read the same way wherever the suite
// reads them: the diagnoser's host model and send_bw's NUMA placement.

#include <filesystem>
#include <optional>
#include <string>

namespace rdmakit {

// The first line of a sysfs, procfs or configfs attribute without its trailing newline or
// spaces; nullopt when it is missing or unreadable (sysfs answers EINVAL for GID attributes
// of unused table entries).
std::optional<std::string> read_first_line(const std::filesystem::path& file);

}  // namespace rdmakit
