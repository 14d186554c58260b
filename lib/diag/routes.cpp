#include "lib/diag/routes.hpp"

#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <net/if.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <span>

#include <fmt/format.h>

#include "lib/diag/netlink.hpp"
#include "lib/net/ip_address.hpp"

namespace rdmakit::diag {

namespace {

// A numeric address as the kernel takes it in RTA_DST, RTA_SRC or NDA_DST.
struct RawAddress {
  int family = 0;
  std::array<std::byte, 16> bytes{};
  std::size_t size = 0;
  std::span<const std::byte> view() const { return {bytes.data(), size}; }
};

// As written: the kernel routes ::ffff:10.0.0.1 by its IPv6 table, as rdma_cm asks it to.
std::optional<RawAddress> numeric_address(const std::string& text) {
  const auto parsed = IpAddress::parse(text, MappedAddress::kept);
  if (!parsed) return std::nullopt;
  RawAddress address;
  address.family = parsed->family;
  address.size = parsed->size();
  std::transform(parsed->bytes.begin(), parsed->bytes.end(), address.bytes.begin(),
                 [](std::uint8_t b) { return std::byte{b}; });
  return address;
}

std::string address_text(int family, std::span<const std::byte> raw) {
  IpAddress address{.family = family, .bytes = {}};
  if ((family != AF_INET && family != AF_INET6) || raw.size() < address.size()) return {};
  std::transform(raw.begin(), raw.begin() + static_cast<std::ptrdiff_t>(address.size()), address.bytes.begin(),
                 [](std::byte b) { return std::to_integer<std::uint8_t>(b); });
  return address.to_string();
}

std::string netdev_name(std::optional<std::uint32_t> index) {
  std::array<char, IF_NAMESIZE> name{};
  if (!index || if_indextoname(*index, name.data()) == nullptr) return {};
  return name.data();
}

std::string lladdr_text(std::span<const std::byte> raw) {
  std::string text;
  for (const auto byte : raw) {
    text += fmt::format("{}{:02x}", text.empty() ? "" : ":", static_cast<unsigned>(byte));
  }
  return text;
}

// The errno a route of this type gives a packet, 0 for one that delivers.
int route_type_errno(unsigned char type) {
  switch (type) {
    case RTN_UNREACHABLE: return EHOSTUNREACH;
    case RTN_PROHIBIT: return EACCES;
    case RTN_BLACKHOLE: return EINVAL;
    default: return 0;
  }
}

template <typename Header>
std::optional<Header> fixed_header(const nlmsghdr& message) {
  if (message.nlmsg_len < NLMSG_LENGTH(sizeof(Header))) return std::nullopt;
  Header header{};
  std::memcpy(&header, NLMSG_DATA(&message), sizeof header);
  return header;
}

const char* neighbour_state_name(std::uint16_t state) {
  constexpr std::pair<std::uint16_t, const char*> names[] = {
      {NUD_PERMANENT, "PERMANENT"}, {NUD_NOARP, "NOARP"}, {NUD_REACHABLE, "REACHABLE"},   {NUD_STALE, "STALE"},
      {NUD_DELAY, "DELAY"},         {NUD_PROBE, "PROBE"}, {NUD_INCOMPLETE, "INCOMPLETE"}, {NUD_FAILED, "FAILED"},
  };
  for (const auto& [bit, name] : names) {
    if ((state & bit) != 0) return name;
  }
  return "none";
}

}  // namespace

RouteInfo route_to(const std::string& destination, const std::string& source) {
  RouteInfo route{.destination = destination, .netdev = {}, .source = {}, .gateway = {}, .errnum = 0};
  const auto to = numeric_address(destination);
  const auto from = source.empty() ? std::nullopt : numeric_address(source);
  if (!to || (!source.empty() && (!from || from->family != to->family))) {
    route.errnum = EINVAL;
    return route;
  }
  NetlinkRequest request(RTM_GETROUTE, NLM_F_REQUEST);
  rtmsg query{};
  query.rtm_family = static_cast<unsigned char>(to->family);
  query.rtm_dst_len = static_cast<unsigned char>(to->size * 8);
  query.rtm_src_len = static_cast<unsigned char>(from ? from->size * 8 : 0);
  request.append_header(query);
  request.add_attribute(RTA_DST, to->bytes.data(), to->size);
  if (from) request.add_attribute(RTA_SRC, from->bytes.data(), from->size);
  unsigned char type = RTN_UNICAST;
  route.errnum = netlink_exchange(NETLINK_ROUTE, request, [&](const nlmsghdr& message) {
    const auto answer = fixed_header<rtmsg>(message);
    if (message.nlmsg_type != RTM_NEWROUTE || !answer) return;
    type = answer->rtm_type;
    for (const auto& attribute : message_attributes(message, sizeof(rtmsg))) {
      if (attribute.type == RTA_OIF) {
        route.netdev = netdev_name(attribute.u32());
      } else if (attribute.type == RTA_PREFSRC) {
        route.source = address_text(to->family, attribute.payload);
      } else if (attribute.type == RTA_GATEWAY) {
        route.gateway = address_text(to->family, attribute.payload);
      }
    }
  });
  if (route.errnum == 0) route.errnum = route_type_errno(type);
  if (route.errnum != 0) {
    route.netdev.clear();
  } else if (route.source.empty()) {
    route.source = source;  // the kernel names no preferred source when it was given one
  }
  return route;
}

Neighbour neighbour_of(const std::string& address, const std::string& netdev) {
  Neighbour entry{.address = address, .netdev = netdev, .state = "none", .lladdr = {}};
  const auto target = numeric_address(address);
  const auto ifindex = netdev.empty() ? 0 : if_nametoindex(netdev.c_str());
  if (!target || (!netdev.empty() && ifindex == 0)) return entry;
  // A dump filtered here: the get request (NDA_DST) needs a newer kernel than the dump does.
  NetlinkRequest request(RTM_GETNEIGH, NLM_F_REQUEST | NLM_F_DUMP);
  ndmsg query{};
  query.ndm_family = static_cast<unsigned char>(target->family);
  request.append_header(query);
  const auto wanted = address_text(target->family, target->view());
  netlink_exchange(NETLINK_ROUTE, request, [&](const nlmsghdr& message) {
    const auto found = fixed_header<ndmsg>(message);
    if (message.nlmsg_type != RTM_NEWNEIGH || !found ||
        (ifindex != 0 && found->ndm_ifindex != static_cast<int>(ifindex))) {
      return;
    }
    std::string destination;
    std::string lladdr;
    for (const auto& attribute : message_attributes(message, sizeof(ndmsg))) {
      if (attribute.type == NDA_DST) destination = address_text(found->ndm_family, attribute.payload);
      if (attribute.type == NDA_LLADDR) lladdr = lladdr_text(attribute.payload);
    }
    if (destination != wanted) return;
    entry.state = neighbour_state_name(found->ndm_state);
    entry.lladdr = lladdr;
    entry.netdev = netdev_name(static_cast<std::uint32_t>(found->ndm_ifindex));
  });
  return entry;
}

}  // namespace rdmakit::diag
