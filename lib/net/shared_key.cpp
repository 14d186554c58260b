#include "lib/net/shared_key.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/base/file_descriptor.hpp"

namespace rdmakit {

namespace {

void check_owner_and_mode(const std::string& path, const struct stat& info) {
  if (!S_ISREG(info.st_mode)) throw UsageError(fmt::format("--key-file {}: not a regular file", path));
  if (info.st_uid != geteuid()) {
    throw UsageError(
        fmt::format("--key-file {}: owned by uid {}, not by this user (uid {}); a key must be its user's own", path,
                    info.st_uid, geteuid()));
  }
  if ((info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    throw UsageError(fmt::format("--key-file {}: mode {:04o} lets others read or change the key; run 'chmod 600 {}'",
                                 path, info.st_mode & 07777, path));
  }
}

}  // namespace

SharedKey read_shared_key(const std::string& path) {
  // The checks are made on the file opened, not on the name, so the file read is the one checked.
  const FileDescriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (file.get() < 0) throw UsageError(fmt::format("--key-file {}: {}", path, std::strerror(errno)));
  struct stat info {};
  if (fstat(file.get(), &info) != 0) throw UsageError(fmt::format("--key-file {}: {}", path, std::strerror(errno)));
  check_owner_and_mode(path, info);
  SharedKey key;
  std::array<unsigned char, 1024> chunk{};
  for (;;) {
    const auto got = ::read(file.get(), chunk.data(), chunk.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw UsageError(fmt::format("--key-file {}: {}", path, std::strerror(errno)));
    if (got == 0) break;
    key.bytes.insert(key.bytes.end(), chunk.begin(), chunk.begin() + got);
    if (key.bytes.size() > max_key_bytes + 2) break;
  }
  if (!key.bytes.empty() && key.bytes.back() == '\n') key.bytes.pop_back();
  if (!key.bytes.empty() && key.bytes.back() == '\r') key.bytes.pop_back();
  if (key.bytes.size() < min_key_bytes) {
    throw UsageError(fmt::format(
        "--key-file {}: {} bytes of key, fewer than {}; make one with 'head -c 32 /dev/urandom | base64 > {}'", path,
        key.bytes.size(), min_key_bytes, path));
  }
  if (key.bytes.size() > max_key_bytes) {
    throw UsageError(fmt::format("--key-file {}: more than {} bytes; a key file holds one key", path, max_key_bytes));
  }
  return key;
}

}  // namespace rdmakit
