#pragma once
// One-line attribute files (sysfs, procfs, configfs), read the same way wherever the suite
// reads them: the diagnoser's host model and send_bw's NUMA placement; and the trimming of
// a field of such text.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace rdmakit {

// The first line of a sysfs, procfs or configfs attribute without its trailing newline or
// spaces; nullopt when it is missing or unreadable (sysfs answers EINVAL for GID attributes
// of unused table entries).
std::optional<std::string> read_first_line(const std::filesystem::path& file);

// `text` without the spaces, tabs and carriage returns around it: a field of a line from
// /proc (a vlan config row) or of an HTTP header (a media range).
std::string_view trimmed(std::string_view text);

// Replaces `path` with `text` whole or not at all: written to `temporary` (beside it, on the
// same file system), then renamed over it, so that a reader never sees it half written.
// False when either step failed; `path` is then as it was.
bool replace_file(const std::filesystem::path& path, const std::filesystem::path& temporary, std::string_view text);

}  // namespace rdmakit
