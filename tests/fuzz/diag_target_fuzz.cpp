// The text parsers of lib/diag/diagnosis.cpp: the address diag-bind (and every tool's --diagnose) is
// asked about, a GID as sysfs prints it, and the address-to-GID and address-to-netdev
// mappings. The input is one such text, tried as each.

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "fuzz_support.hpp"
#include "lib/base/error.hpp"
#include "lib/diag/diagnosis.hpp"

namespace {

using namespace rdmakit;

bool parses_as(int family, const std::string& text) {
  std::array<unsigned char, 16> bytes{};
  return inet_pton(family, text.c_str(), bytes.data()) == 1;
}

std::optional<diag::Target> target_of(const std::string& host) {
  try {
    return diag::make_target(host, 7174, "tcp");
  } catch (const UsageError&) {
    return std::nullopt;
  }
}

void check_target(const std::string& host) {
  const auto target = target_of(host);
  if (!target) {
    FUZZ_CHECK(!host.empty());
    return;
  }
  if (host.empty()) {
    FUZZ_CHECK(target->host.empty() && target->family == 0);
    return;
  }
  FUZZ_CHECK(target->family == AF_INET || target->family == AF_INET6);
  const auto bare = target->host.substr(0, target->host.find('%'));
  FUZZ_CHECK(parses_as(target->family, bare));
  FUZZ_CHECK(!(target->wildcard && target->loopback));
  // The canonical form is a fixed point: the report shows it and later steps re-parse it.
  const auto again = target_of(target->host);
  FUZZ_CHECK(again && again->host == target->host && again->family == target->family &&
             again->wildcard == target->wildcard && again->loopback == target->loopback);

  const auto gid = gid_for_address(target->host);
  FUZZ_CHECK(parses_as(AF_INET6, gid));
  if (target->family == AF_INET) FUZZ_CHECK(gid.starts_with("::ffff:"));

  // An address configured on a netdev (as "address/prefix") is local, however it is spelled.
  if (host.find('/') == std::string::npos) {
    diag::Inventory inventory;
    diag::Netdev netdev;
    netdev.name = "fuzz0";
    netdev.addresses = {host + "/64"};
    inventory.netdevs.push_back(netdev);
    FUZZ_CHECK(diag::address_is_local(inventory, target->host));
    FUZZ_CHECK(diag::netdev_owning(inventory, host) == &inventory.netdevs.front());
  }
}

// sysfs prints GIDs as eight colon-separated groups of four hex digits; anything else is
// shown as it is rather than misread.
void check_gid(const std::string& raw) {
  const auto text = diag::gid_text(raw);
  std::string digits;
  std::copy_if(raw.begin(), raw.end(), std::back_inserter(digits), [](char c) { return c != ':'; });
  const bool gid_shaped = digits.size() == 32 && std::all_of(digits.begin(), digits.end(), [](char c) {
                            return std::isxdigit(static_cast<unsigned char>(c)) != 0;
                          });
  if (gid_shaped) {
    FUZZ_CHECK(parses_as(AF_INET6, text));
  } else {
    FUZZ_CHECK(text == raw);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(fuzz::as_text(data, size));
  check_target(text);
  check_gid(text);
  return 0;
}
