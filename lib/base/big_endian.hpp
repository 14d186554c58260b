#pragma once
// The one big-endian codec of the wire formats: every multi-byte field our messages carry is
// in network order, whatever the host's, so a peer on another architecture reads the same.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace rdmakit {

template <typename Byte>
concept WireByte = std::same_as<Byte, std::uint8_t> || std::same_as<Byte, std::byte>;

// Writes `value` into out[0 .. sizeof(T)), most significant byte first.
template <std::unsigned_integral T, WireByte Byte>
void store_big_endian(Byte* out, T value) {
  for (std::size_t i = sizeof(T); i-- > 0;) {
    out[i] = static_cast<Byte>(value & 0xffU);
    value = static_cast<T>(value >> 8U);
  }
}

// Reads what store_big_endian wrote.
template <std::unsigned_integral T, WireByte Byte>
T load_big_endian(const Byte* in) {
  T value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    value = static_cast<T>((value << 8U) | static_cast<T>(in[i]));
  }
  return value;
}

}  // namespace rdmakit
