#include "lib/rdma/gid.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "lib/net/ip_address.hpp"

namespace rdmakit {

std::string strip_scope(const std::string& host) {
  return host.substr(0, host.find('%'));
}

std::string canonical(const std::string& host) {
  auto bare = strip_scope(host);
  const auto address = IpAddress::parse(bare, MappedAddress::kept);
  return address ? address->to_string() : bare;
}

std::string gid_for_address(const std::string& numeric_host) {
  auto host = canonical(numeric_host);
  const auto address = IpAddress::parse(host, MappedAddress::kept);
  return address && address->family == AF_INET ? "::ffff:" + host : host;
}

bool is_link_local(const GidEntry& entry) {
  const auto address = IpAddress::parse(strip_scope(entry.gid), MappedAddress::kept);
  return address && address->family == AF_INET6 && address->bytes[0] == 0xfe && (address->bytes[1] & 0xc0) == 0x80;
}

std::string ipv4_of(const GidEntry& entry) {
  static constexpr std::string_view mapped = "::ffff:";
  const auto text = canonical(entry.gid);
  if (!text.starts_with(mapped)) return {};
  const auto rest = text.substr(mapped.size());
  const auto address = IpAddress::parse(rest, MappedAddress::kept);
  return address && address->family == AF_INET ? rest : std::string();
}

std::string entry_address(const GidEntry& entry) {
  const auto v4 = ipv4_of(entry);
  return v4.empty() ? canonical(entry.gid) : v4;
}

namespace {

// RoCE v2 first: what routes. Then RoCE v1, then IB (which has no address GIDs anyway).
int type_rank(const std::string& type) {
  if (type == "RoCE v2") return 0;
  if (type == "RoCE v1") return 1;
  return 2;
}

bool is_ipv4_mapped(const GidEntry& entry) {
  return !ipv4_of(entry).empty();
}

}  // namespace

std::string entry_text(const GidEntry& entry) {
  return fmt::format("{} {} {}{}", entry.index, entry.gid, entry.type, entry.netdev.empty() ? "" : " " + entry.netdev);
}

GidAdvice advise_gid(const std::vector<GidPort>& ports, const std::string& numeric_address) {
  GidAdvice advice;
  advice.address = canonical(numeric_address);
  const auto wanted = gid_for_address(numeric_address);
  for (const auto& port : ports) {
    for (const auto& entry : port.gids) {
      if (canonical(entry.gid) != wanted) continue;
      if (advice.entry && type_rank(entry.type) >= type_rank(advice.entry->type)) continue;
      advice.device = port.device;
      advice.port = port.port;
      advice.entry = entry;
    }
  }
  if (!advice.entry) {
    advice.reason = fmt::format("no GID table entry holds {} ({})", advice.address, wanted);
    return advice;
  }
  const auto& e = *advice.entry;
  if (e.type == "RoCE v2") {
    advice.reason = fmt::format(
        "the RoCE v2 entry of {} itself: RoCE v2 is UDP/IP and crosses routers, and the "
        "address's own GID is the one peers reach it by (the link-local fe80 entries are not "
        "forwarded past the first router)",
        advice.address);
  } else if (e.type == "RoCE v1") {
    advice.reason = fmt::format(
        "the only entry of {} is RoCE v1: an Ethernet frame that stays in its L2 segment; "
        "both sides must use RoCE v1",
        advice.address);
  } else {
    advice.reason = fmt::format("the entry that holds {}", advice.address);
  }
  return advice;
}

std::vector<StackSetting> stack_settings(const GidAdvice& advice) {
  if (!advice.entry) return {};
  const auto index = advice.entry->index;
  const auto hca = fmt::format("{}:{}", advice.device, advice.port);
  return {
      {"perftest", fmt::format("-d {} -i {} -x {}", advice.device, advice.port, index)},
      {"NCCL", fmt::format("NCCL_IB_HCA={} NCCL_IB_GID_INDEX={}", hca, index)},
      {"UCX", fmt::format("UCX_NET_DEVICES={} UCX_IB_GID_INDEX={}", hca, index)},
      {"Open MPI (UCX)", fmt::format("mpirun -x UCX_NET_DEVICES={} -x UCX_IB_GID_INDEX={}", hca, index)},
      {"Open MPI (openib)",
       fmt::format("mpirun --mca btl_openib_if_include {} --mca btl_openib_gid_index {}", hca, index)},
  };
}

std::string index_problem(const GidPort& port, std::uint32_t index, const GidAdvice& advice) {
  if (advice.entry && advice.device == port.device && advice.port == port.port && advice.entry->index == index) {
    return {};
  }
  const auto found = std::ranges::find_if(port.gids, [index](const GidEntry& entry) { return entry.index == index; });
  if (found == port.gids.end()) return fmt::format("index {} of {} port {} is empty", index, port.device, port.port);
  const auto& e = *found;
  if (is_link_local(e)) {
    return fmt::format("index {} is link-local {} ({}), which no router forwards", index, e.gid, e.type);
  }
  if (!advice.entry) return {};
  const auto& want = *advice.entry;
  if (e.type != want.type) return fmt::format("index {} is {} {}, not {}", index, e.type, e.gid, want.type);
  if (is_ipv4_mapped(e) != is_ipv4_mapped(want)) {
    return fmt::format("index {} is {} {}, an {} address where {} is {}", index, e.type, e.gid,
                       is_ipv4_mapped(e) ? "IPv4" : "IPv6", advice.address, is_ipv4_mapped(want) ? "IPv4" : "IPv6");
  }
  if (e.netdev != want.netdev) {
    return fmt::format("index {} is {} on {}, another netdev than {}'s {}", index, e.gid, e.netdev, advice.address,
                       want.netdev);
  }
  return {};
}

}  // namespace rdmakit
