#include "lib/net/hmac_sha256.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <stdexcept>

namespace rdmakit::net {

Sha256Tag hmac_sha256(std::span<const std::uint8_t> key, std::span<const std::uint8_t> message) {
  Sha256Tag tag{};
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), message.data(), message.size(), tag.data(),
           &length) == nullptr ||
      length != tag.size()) {
    throw std::runtime_error("HMAC-SHA256 failed in libcrypto");
  }
  return tag;
}

}  // namespace rdmakit::net
