#pragma once
// An IP address and a network, parsed in one place: every address a tool reads (a flag, a
// peer's message, a netdev's list) and every subnet it matches goes through these.

#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rdmakit {

// What parse() makes of an IPv4-mapped IPv6 address (::ffff:10.0.0.1): the IPv4 address it
// maps, as an allow list or a peer's address means it; or the IPv6 address as written, as a
// GID, rdma_cm and the kernel's IPv6 routes take it.
enum class MappedAddress { as_ipv4, kept };

// An IPv4 or IPv6 address; an IPv4-mapped IPv6 address (::ffff:10.0.0.1) is the IPv4 one
// unless parsed with MappedAddress::kept.
struct IpAddress {
  int family = AF_UNSPEC;  // AF_INET or AF_INET6
  std::array<std::uint8_t, 16> bytes{};

  // Numeric text only (inet_pton's forms), and all of it: a NUL inside refuses it.
  static std::optional<IpAddress> parse(std::string_view text, MappedAddress mapped = MappedAddress::as_ipv4);
  static std::optional<IpAddress> of(const sockaddr* address);
  std::size_t size() const { return family == AF_INET ? 4 : 16; }
  bool is_wildcard() const;
  std::string to_string() const;
  friend bool operator==(const IpAddress&, const IpAddress&) = default;
};

// A network: an address with its prefix length, the host bits cleared.
class Cidr {
 public:
  Cidr(const IpAddress& address, unsigned prefix);
  // "10.0.0.0/24", "fd00::/64", a bare address (/32, /128); throws UsageError naming `flag`
  // and the text.
  static Cidr parse(std::string_view text, std::string_view flag);
  // An address with its prefix length as a netdev holds it ("10.58.2.10/16"): nullopt for
  // anything else, a bare address included.
  static std::optional<Cidr> read(std::string_view text);
  bool contains(const IpAddress& address) const;
  const IpAddress& network() const { return network_; }
  unsigned prefix() const { return prefix_; }
  std::string to_string() const;
  friend bool operator==(const Cidr&, const Cidr&) = default;

 private:
  IpAddress network_;
  unsigned prefix_;
};

}  // namespace rdmakit
