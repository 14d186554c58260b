#include "lib/base/text_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

namespace rdmakit {

std::optional<std::string> read_first_line(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line)) {
    return std::nullopt;
  }
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ' || line.back() == '\r')) {
    line.pop_back();
  }
  return line;
}

namespace {

// The process's umask, read without changing it (umask(2) cannot be read alone, and setting
// it is not thread-safe): Linux reports it in /proc/self/status.
mode_t current_umask() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("Umask:")) return static_cast<mode_t>(std::stoul(line.substr(6), nullptr, 8));
  }
  return 022;
}

std::string failure(const std::filesystem::path& path, const char* step, int errnum) {
  return fmt::format("cannot write {}: {}: {} ({} is as it was)", path.string(), step, std::strerror(errnum),
                     path.string());
}

// Writes all of `text` to `fd`, through short writes and signals.
int write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const auto wrote = ::write(fd, text.data(), text.size());
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) return errno;
    text.remove_prefix(static_cast<std::size_t>(wrote));
  }
  return 0;
}

}  // namespace

std::optional<std::string> write_file_whole(const std::filesystem::path& path, std::string_view text) {
  const auto folder = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  // Hidden and with a suffix of its own: a reader that globs the folder (node_exporter's
  // *.prom) never takes it for a finished file.
  std::string temporary = (folder / ("." + path.filename().string() + ".XXXXXX")).string();
  const int fd = mkostemp(temporary.data(), O_CLOEXEC);
  if (fd < 0) return failure(path, "creating a file beside it", errno);
  struct stat old {};
  const mode_t mode = ::stat(path.c_str(), &old) == 0 ? (old.st_mode & 07777) : (0666 & ~current_umask());
  int errnum = ::fchmod(fd, mode) == 0 ? 0 : errno;
  const char* step = "fchmod";
  if (errnum == 0) {
    errnum = write_all(fd, text);
    step = "write";
  }
  if (errnum == 0 && ::fsync(fd) != 0) {
    errnum = errno;
    step = "fsync";
  }
  if (::close(fd) != 0 && errnum == 0) {
    errnum = errno;
    step = "close";
  }
  if (errnum == 0 && ::rename(temporary.c_str(), path.c_str()) != 0) {
    errnum = errno;
    step = "rename";
  }
  if (errnum != 0) {
    ::unlink(temporary.c_str());
    return failure(path, step, errnum);
  }
  // The rename itself reaches the disk with the folder's entry.
  if (const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return std::nullopt;
}

std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

}  // namespace rdmakit
