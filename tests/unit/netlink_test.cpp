// Netlink messages as the kernel lays them out, built here byte by byte: the request
// builder's lengths, the attribute walk's bounds, and the listeners in a message of RDMA
// netlink's cm_id dump (what `rdma resource show cm_id` prints), which no host without an
// RDMA device can produce live.

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_netlink.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "lib/diag/cm_listeners.hpp"
#include "lib/diag/netlink.hpp"

namespace rdmakit::diag {
namespace {

using Bytes = std::vector<std::byte>;

Bytes attribute(std::uint16_t type, const void* data, std::size_t length) {
  Bytes bytes(NLA_HDRLEN + NLA_ALIGN(length));
  const nlattr header{.nla_len = static_cast<std::uint16_t>(NLA_HDRLEN + length), .nla_type = type};
  std::memcpy(bytes.data(), &header, sizeof header);
  std::memcpy(bytes.data() + NLA_HDRLEN, data, length);
  return bytes;
}

Bytes u32_attribute(std::uint16_t type, std::uint32_t value) {
  return attribute(type, &value, sizeof value);
}

Bytes u8_attribute(std::uint16_t type, std::uint8_t value) {
  return attribute(type, &value, sizeof value);
}

Bytes nested(std::uint16_t type, const std::vector<Bytes>& inner) {
  Bytes payload;
  for (const auto& item : inner) payload.insert(payload.end(), item.begin(), item.end());
  return attribute(type | NLA_F_NESTED, payload.data(), payload.size());
}

Bytes source_address(const char* ipv4, std::uint16_t port) {
  sockaddr_storage storage{};
  auto* address = reinterpret_cast<sockaddr_in*>(&storage);
  address->sin_family = AF_INET;
  address->sin_port = htons(port);
  inet_pton(AF_INET, ipv4, &address->sin_addr);
  return attribute(RDMA_NLDEV_ATTR_RES_SRC_ADDR, &storage, sizeof storage);
}

Bytes cm_id(std::uint32_t port_space, std::uint8_t state, const Bytes& source) {
  return nested(RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY,
                {u32_attribute(RDMA_NLDEV_ATTR_PORT_INDEX, 1), u32_attribute(RDMA_NLDEV_ATTR_RES_PS, port_space),
                 u8_attribute(RDMA_NLDEV_ATTR_RES_STATE, state), source});
}

// A message of the dump: the device, then its cm_ids. Kept in aligned storage, as recv's
// buffer is.
struct Message {
  std::vector<nlmsghdr> storage;
  explicit Message(const std::vector<Bytes>& attributes) {
    Bytes body;
    for (const auto& item : attributes) body.insert(body.end(), item.begin(), item.end());
    const auto length = NLMSG_HDRLEN + body.size();
    storage.resize(length / sizeof(nlmsghdr) + 1);
    storage[0].nlmsg_len = static_cast<std::uint32_t>(length);
    storage[0].nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_RES_CM_ID_GET);
    std::memcpy(reinterpret_cast<std::byte*>(storage.data()) + NLMSG_HDRLEN, body.data(), body.size());
  }
  const nlmsghdr& header() const { return storage[0]; }
};

TEST(Netlink, RequestCarriesItsAttributesAligned) {
  NetlinkRequest request(RTM_GETROUTE, NLM_F_REQUEST);
  EXPECT_FALSE(request.is_dump());
  request.add_attribute(1, "abc", 3);  // padded to 4
  request.add_u32(2, 7);
  const auto bytes = request.bytes();
  ASSERT_EQ(bytes.size(), NLMSG_HDRLEN + 8u + 8u);
  nlmsghdr header{};
  std::memcpy(&header, bytes.data(), sizeof header);
  EXPECT_EQ(header.nlmsg_len, bytes.size());
  const auto attributes = netlink_attributes(bytes.subspan(NLMSG_HDRLEN));
  ASSERT_EQ(attributes.size(), 2u);
  EXPECT_EQ(attributes[0].text(), "abc");
  EXPECT_EQ(attributes[1].u32(), 7u);
  EXPECT_TRUE(NetlinkRequest(RTM_GETNEIGH, NLM_F_REQUEST | NLM_F_DUMP).is_dump());
}

TEST(Netlink, AnAttributeLongerThanItsMessageEndsTheWalk) {
  auto bytes = u32_attribute(RDMA_NLDEV_ATTR_DEV_INDEX, 3);
  const auto second = u32_attribute(RDMA_NLDEV_ATTR_DEV_INDEX, 4);
  bytes.insert(bytes.end(), second.begin(), second.end());
  bytes[NLA_HDRLEN + 4] = std::byte{200};  // the second one claims 200 bytes
  const auto attributes = netlink_attributes(bytes);
  ASSERT_EQ(attributes.size(), 1u);
  EXPECT_EQ(attributes[0].u32(), 3u);
  EXPECT_EQ(attributes[0].u8(), 3u);
  EXPECT_FALSE(NetlinkAttribute{}.u32());
  EXPECT_FALSE(NetlinkAttribute{}.u8());
}

TEST(Netlink, ListenersOfACmIdDump) {
  // A wildcard listener (the kernel's per-device child of it), an id only bound, and a UDP
  // listener on an address.
  const Message message(
      {u32_attribute(RDMA_NLDEV_ATTR_DEV_INDEX, 0), attribute(RDMA_NLDEV_ATTR_DEV_NAME, "rxe0", 5),
       nested(RDMA_NLDEV_ATTR_RES_CM_ID, {cm_id(RDMA_PS_TCP, 8, source_address("0.0.0.0", 7174)),
                                          cm_id(RDMA_PS_TCP, 7, source_address("10.57.0.1", 7175)),
                                          cm_id(RDMA_PS_UDP, 8, source_address("10.57.0.1", 7471))})});
  const auto listeners = listeners_in(message.header());
  ASSERT_EQ(listeners.size(), 2u);
  EXPECT_EQ(listeners[0].port, 7174);
  EXPECT_EQ(listeners[0].port_space, "tcp");
  EXPECT_EQ(listeners[0].address, "0.0.0.0");
  EXPECT_EQ(listeners[0].device, "rxe0");
  EXPECT_EQ(listeners[1].port, 7471);
  EXPECT_EQ(listeners[1].port_space, "udp");
  EXPECT_EQ(listeners[1].address, "10.57.0.1");
  // A message without cm_ids, or cut short, has none.
  EXPECT_TRUE(listeners_in(Message({attribute(RDMA_NLDEV_ATTR_DEV_NAME, "rxe0", 5)}).header()).empty());
  auto cut = message;
  cut.storage[0].nlmsg_len = NLMSG_HDRLEN + 20;
  EXPECT_TRUE(listeners_in(cut.header()).empty());
}

}  // namespace
}  // namespace rdmakit::diag
