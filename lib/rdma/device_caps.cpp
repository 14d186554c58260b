#include "lib/rdma/device_caps.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

namespace rdmakit {

std::string_view transport_name(Transport transport) {
  switch (transport) {
    case Transport::infiniband: return "InfiniBand";
    case Transport::roce: return "RoCE";
    case Transport::iwarp: return "iWARP";
    case Transport::unspecified: return "neither InfiniBand, RoCE nor iWARP";
  }
  return "unknown";
}

std::uint8_t fitted_read_depth(std::uint32_t wanted, std::uint32_t device_limit) {
  const std::uint32_t cm_limit = std::numeric_limits<std::uint8_t>::max();
  return static_cast<std::uint8_t>(std::min({wanted, device_limit, cm_limit}));
}

std::vector<std::uint32_t> inline_sizes_to_try(std::uint32_t wanted) {
  std::vector<std::uint32_t> sizes{wanted};
  for (const std::uint32_t granted : {512U, 256U, 220U, 128U, 64U, 48U, 32U, 16U, 0U}) {
    if (granted < sizes.back()) sizes.push_back(granted);
  }
  return sizes;
}

std::optional<std::string> missing_for(const DeviceCaps& caps, Need need) {
  switch (need) {
    case Need::datagrams:
      if (!has_datagrams(caps)) {
        return fmt::format("{} is {}: it has no unreliable datagrams (UD), which need RoCE or InfiniBand", caps.device,
                           transport_name(caps.transport));
      }
      break;
    case Need::multicast:
      if (caps.transport == Transport::iwarp || caps.transport == Transport::unspecified) {
        return fmt::format("{} is {}: it has no multicast, which needs RoCE or InfiniBand", caps.device,
                           transport_name(caps.transport));
      }
      break;
  }
  return std::nullopt;
}

}  // namespace rdmakit
