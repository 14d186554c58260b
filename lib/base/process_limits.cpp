#include "lib/base/process_limits.hpp"

#include <linux/capability.h>
#include <sys/resource.h>

#include <exception>
#include <fstream>
#include <string>

namespace rdmakit {

bool has_capability(int capability) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("CapEff:")) {
      try {
        return ((std::stoull(line.substr(7), nullptr, 16) >> capability) & 1) != 0;
      } catch (const std::exception&) {
        return false;
      }
    }
  }
  return false;
}

std::optional<std::uint64_t> pinnable_bytes() {
  rlimit limit{};
  if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY || has_capability(CAP_IPC_LOCK)) {
    return std::nullopt;
  }
  return limit.rlim_cur;
}

}  // namespace rdmakit
