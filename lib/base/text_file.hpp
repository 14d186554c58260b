#pragma once
// One-line attribute files (sysfs, procfs, configfs), read the same way wherever the suite
// reads them: the diagnoser's host model and send_bw's NUMA placement; the trimming of a
// field of such text; and the one way every report, metrics file and JUnit file is written.

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

// Replaces `path` with `text` whole or not at all: written to a new file beside it (same
// folder, so the same file system; created exclusively under a name of its own, so no link
// is followed and no other writer shares it), flushed to the disk, then renamed over it. A
// reader sees the old file or the new one, never a part; a full disk or any other error
// leaves the old one as it was. Returns nullopt, or what failed ("cannot write PATH: ...").
// The new file keeps the old one's permissions; a first one gets 0666 less the umask.
std::optional<std::string> write_file_whole(const std::filesystem::path& path, std::string_view text);

}  // namespace rdmakit
