#include "lib/base/host_name.hpp"

#include <unistd.h>

#include <array>
#include <climits>

namespace rdmakit {

std::string host_name() {
  std::array<char, HOST_NAME_MAX + 1> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return {};
  return name.data();
}

}  // namespace rdmakit
