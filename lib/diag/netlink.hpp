#pragma once
// Netlink for the live probes (RDMA netlink's device and cm_id dumps, rtnetlink's route and
// neighbour queries): a request built with its attributes, one exchange on a fresh socket
// bounded by a receive timeout, and replies walked as attributes whose lengths are checked
// before anything is read.

#include <linux/netlink.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace rdmakit::diag {

class NetlinkRequest {
 public:
  NetlinkRequest(std::uint16_t type, std::uint16_t flags);

  // The family's fixed header after nlmsghdr (rtmsg, ndmsg, ...); before any attribute.
  template <typename Header>
  void append_header(const Header& header) {
    append(&header, sizeof header);
  }
  void add_attribute(std::uint16_t type, const void* data, std::size_t length);
  void add_u32(std::uint16_t type, std::uint32_t value) { add_attribute(type, &value, sizeof value); }

  bool is_dump() const;
  std::span<const std::byte> bytes() const { return bytes_; }

 private:
  void append(const void* data, std::size_t length);
  nlmsghdr& header();

  std::vector<std::byte> bytes_;
};

// One attribute of a reply: its type without the nested and byte-order flags, and its
// payload.
struct NetlinkAttribute {
  int type = 0;
  std::span<const std::byte> payload;

  std::optional<std::uint32_t> u32() const;
  std::optional<std::uint8_t> u8() const;
  std::string text() const;  // up to the first NUL
  std::vector<NetlinkAttribute> nested() const;
};

// The attributes in `data`; one whose length does not fit ends the walk.
std::vector<NetlinkAttribute> netlink_attributes(std::span<const std::byte> data);

// A reply's attributes, after nlmsghdr and the family's fixed header of `fixed` bytes
// (none when the message is too short for it).
std::vector<NetlinkAttribute> message_attributes(const nlmsghdr& message, std::size_t fixed = 0);

// Sends `request` on a new socket of the netlink `protocol` (NETLINK_RDMA, NETLINK_ROUTE)
// and hands each reply to `on_reply`: every message of a dump until the kernel's end of it,
// the one answer of a plain request. Returns 0 or the errno that ended it: the socket's, a
// receive that timed out (EAGAIN) or the error the kernel answered with.
int netlink_exchange(int protocol, const NetlinkRequest& request, const std::function<void(const nlmsghdr&)>& on_reply);

}  // namespace rdmakit::diag
