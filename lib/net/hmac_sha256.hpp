#pragma once
// HMAC-SHA256 (RFC 2104, libcrypto's): the one MAC of the side channels' handshake, their
// frames and the agent's probe tickets.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace rdmakit::net {

inline constexpr std::size_t sha256_bytes = 32;
using Sha256Tag = std::array<std::uint8_t, sha256_bytes>;

// Throws std::runtime_error only when libcrypto itself fails.
Sha256Tag hmac_sha256(std::span<const std::uint8_t> key, std::span<const std::uint8_t> message);

}  // namespace rdmakit::net
