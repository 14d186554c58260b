#include "lib/diag/netlink.hpp"

#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>

#include "lib/base/file_descriptor.hpp"

namespace rdmakit::diag {

NetlinkRequest::NetlinkRequest(std::uint16_t type, std::uint16_t flags) : bytes_(NLMSG_HDRLEN) {
  header().nlmsg_len = NLMSG_HDRLEN;
  header().nlmsg_type = type;
  header().nlmsg_flags = flags;
  header().nlmsg_seq = 1;
}

nlmsghdr& NetlinkRequest::header() {
  return *reinterpret_cast<nlmsghdr*>(bytes_.data());
}

bool NetlinkRequest::is_dump() const {
  return (reinterpret_cast<const nlmsghdr*>(bytes_.data())->nlmsg_flags & NLM_F_DUMP) == NLM_F_DUMP;
}

void NetlinkRequest::append(const void* data, std::size_t length) {
  const auto at = bytes_.size();
  bytes_.resize(at + NLMSG_ALIGN(length));
  std::memcpy(bytes_.data() + at, data, length);
  header().nlmsg_len = static_cast<std::uint32_t>(bytes_.size());
}

void NetlinkRequest::add_attribute(std::uint16_t type, const void* data, std::size_t length) {
  const nlattr attribute{.nla_len = static_cast<std::uint16_t>(NLA_HDRLEN + length), .nla_type = type};
  const auto at = bytes_.size();
  bytes_.resize(at + NLA_HDRLEN + NLA_ALIGN(length));
  std::memcpy(bytes_.data() + at, &attribute, sizeof attribute);
  std::memcpy(bytes_.data() + at + NLA_HDRLEN, data, length);
  header().nlmsg_len = static_cast<std::uint32_t>(bytes_.size());
}

std::optional<std::uint32_t> NetlinkAttribute::u32() const {
  if (payload.size() < sizeof(std::uint32_t)) return std::nullopt;
  std::uint32_t value = 0;
  std::memcpy(&value, payload.data(), sizeof value);
  return value;
}

std::optional<std::uint8_t> NetlinkAttribute::u8() const {
  if (payload.empty()) return std::nullopt;
  return static_cast<std::uint8_t>(payload[0]);
}

std::string NetlinkAttribute::text() const {
  const auto* begin = reinterpret_cast<const char*>(payload.data());
  return {begin, strnlen(begin, payload.size())};
}

std::vector<NetlinkAttribute> NetlinkAttribute::nested() const {
  return netlink_attributes(payload);
}

std::vector<NetlinkAttribute> netlink_attributes(std::span<const std::byte> data) {
  std::vector<NetlinkAttribute> attributes;
  while (data.size() >= NLA_HDRLEN) {
    nlattr attribute{};
    std::memcpy(&attribute, data.data(), sizeof attribute);
    if (attribute.nla_len < NLA_HDRLEN || attribute.nla_len > data.size()) break;
    attributes.push_back({.type = attribute.nla_type & NLA_TYPE_MASK,
                          .payload = data.subspan(NLA_HDRLEN, attribute.nla_len - NLA_HDRLEN)});
    data = data.subspan(std::min<std::size_t>(NLA_ALIGN(attribute.nla_len), data.size()));
  }
  return attributes;
}

std::vector<NetlinkAttribute> message_attributes(const nlmsghdr& message, std::size_t fixed) {
  const auto start = NLMSG_HDRLEN + NLMSG_ALIGN(fixed);
  if (message.nlmsg_len < start) return {};
  const auto* bytes = reinterpret_cast<const std::byte*>(&message);
  return netlink_attributes({bytes + start, message.nlmsg_len - start});
}

namespace {

// What ends the exchange at this message: nullopt to go on, else 0 or an errno.
std::optional<int> end_of_exchange(const nlmsghdr& message) {
  if (message.nlmsg_type == NLMSG_ERROR) {
    // An acknowledgement (error 0) or the request's errno, negated.
    if (message.nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) return EIO;
    nlmsgerr error{};
    std::memcpy(&error, NLMSG_DATA(&message), sizeof error);
    return -error.error;
  }
  if (message.nlmsg_type == NLMSG_DONE) {
    // A dump that failed part way says so in the int after the header.
    int error = 0;
    if (message.nlmsg_len >= NLMSG_LENGTH(sizeof error)) std::memcpy(&error, NLMSG_DATA(&message), sizeof error);
    return error < 0 ? -error : 0;
  }
  return std::nullopt;
}

}  // namespace

int netlink_exchange(int protocol, const NetlinkRequest& request,
                     const std::function<void(const nlmsghdr&)>& on_reply) {
  const FileDescriptor sock(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol));
  if (sock.get() < 0) return errno;
  const timeval one_second{.tv_sec = 1, .tv_usec = 0};
  setsockopt(sock.get(), SOL_SOCKET, SO_RCVTIMEO, &one_second, sizeof one_second);
  const auto bytes = request.bytes();
  if (send(sock.get(), bytes.data(), bytes.size(), 0) < 0) return errno;
  // Large enough for what the kernel puts in one datagram of a dump (it sizes them to the
  // reader's buffer, up to 32 KiB).
  std::vector<std::byte> buffer(std::size_t{64} * 1024);
  for (;;) {
    const ssize_t received = recv(sock.get(), buffer.data(), buffer.size(), 0);
    if (received < 0) return errno;
    if (received == 0) return EIO;
    auto left = static_cast<unsigned>(received);
    for (const auto* message = reinterpret_cast<const nlmsghdr*>(buffer.data()); NLMSG_OK(message, left);
         message = NLMSG_NEXT(message, left)) {
      if (const auto end = end_of_exchange(*message)) return *end;
      on_reply(*message);
      if (!request.is_dump()) return 0;
    }
  }
}

}  // namespace rdmakit::diag
