#include "lib/net/ip_address.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include <fmt/format.h>

#include "lib/base/error.hpp"

namespace rdmakit {

namespace {

constexpr std::array<std::uint8_t, 12> v4_mapped_prefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

IpAddress from_v4(const void* bytes) {
  IpAddress address;
  address.family = AF_INET;
  std::memcpy(address.bytes.data(), bytes, 4);
  return address;
}

IpAddress from_v6(const in6_addr& raw) {
  if (std::equal(v4_mapped_prefix.begin(), v4_mapped_prefix.end(), raw.s6_addr)) {
    return from_v4(&raw.s6_addr[12]);
  }
  IpAddress address;
  address.family = AF_INET6;
  std::memcpy(address.bytes.data(), raw.s6_addr, 16);
  return address;
}

}  // namespace

std::optional<IpAddress> IpAddress::parse(std::string_view text, MappedAddress mapped) {
  // inet_pton stops at a NUL: "10.0.0.1\0anything" would read as 10.0.0.1.
  if (text.find('\0') != std::string_view::npos) return std::nullopt;
  const std::string copy(text);
  std::array<std::uint8_t, 16> raw{};
  if (inet_pton(AF_INET, copy.c_str(), raw.data()) == 1) return from_v4(raw.data());
  in6_addr v6{};
  if (inet_pton(AF_INET6, copy.c_str(), &v6) != 1) return std::nullopt;
  if (mapped == MappedAddress::as_ipv4) return from_v6(v6);
  IpAddress address;
  address.family = AF_INET6;
  std::memcpy(address.bytes.data(), v6.s6_addr, 16);
  return address;
}

std::optional<IpAddress> IpAddress::of(const sockaddr* address) {
  if (address == nullptr) return std::nullopt;
  if (address->sa_family == AF_INET) return from_v4(&reinterpret_cast<const sockaddr_in*>(address)->sin_addr);
  if (address->sa_family == AF_INET6) return from_v6(reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr);
  return std::nullopt;
}

bool IpAddress::is_wildcard() const {
  return std::all_of(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size()),
                     [](std::uint8_t b) { return b == 0; });
}

std::string IpAddress::to_string() const {
  std::array<char, INET6_ADDRSTRLEN> text{};
  inet_ntop(family, bytes.data(), text.data(), text.size());
  return text.data();
}

Cidr::Cidr(const IpAddress& address, unsigned prefix)
    : network_(address), prefix_(std::min<unsigned>(prefix, static_cast<unsigned>(address.size() * 8))) {
  for (std::size_t i = 0; i < network_.size(); ++i) {
    const auto kept = std::clamp<int>(static_cast<int>(prefix_) - static_cast<int>(i * 8), 0, 8);
    network_.bytes[i] &= static_cast<std::uint8_t>(0xff00U >> kept);
  }
}

Cidr Cidr::parse(std::string_view text, std::string_view flag) {
  const auto bad = [&](std::string_view why) { return UsageError(fmt::format("{} '{}': {}", flag, text, why)); };
  const auto slash = text.find('/');
  const auto address = IpAddress::parse(text.substr(0, slash));
  if (!address) throw bad("not an IPv4 or IPv6 address (CIDR, as 10.0.0.0/24 or fd00::/64)");
  // A mapped address is read as IPv4, so its prefix counts the IPv4 bits only.
  const bool mapped = address->family == AF_INET && text.substr(0, slash).find(':') != std::string_view::npos;
  const unsigned width = static_cast<unsigned>(address->size() * 8);
  unsigned prefix = width;
  if (slash != std::string_view::npos) {
    const auto digits = text.substr(slash + 1);
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), prefix);
    if (digits.empty() || error != std::errc() || end != digits.data() + digits.size()) {
      throw bad("the prefix length after '/' is not a number");
    }
    if (mapped) {
      if (prefix < 96) throw bad("an IPv4-mapped network needs a prefix of at least 96");
      prefix -= 96;
    }
    if (prefix > width) throw bad(fmt::format("the prefix length is over {}", width));
  }
  return Cidr(*address, prefix);
}

std::optional<Cidr> Cidr::read(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const auto address = IpAddress::parse(text.substr(0, slash));
  if (!address) return std::nullopt;
  const auto digits = text.substr(slash + 1);
  unsigned prefix = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), prefix);
  if (digits.empty() || error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  if (prefix > address->size() * 8) return std::nullopt;
  return Cidr(*address, prefix);
}

bool Cidr::contains(const IpAddress& address) const {
  return address.family == network_.family && Cidr(address, prefix_).network_ == network_;
}

std::string Cidr::to_string() const {
  return fmt::format("{}/{}", network_.to_string(), prefix_);
}

}  // namespace rdmakit
