#include "lib/base/big_endian.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace rdmakit {
namespace {

TEST(BigEndian, StoresMostSignificantByteFirst) {
  std::array<std::uint8_t, 8> bytes{};
  store_big_endian(bytes.data(), std::uint32_t{0x01020304});
  EXPECT_EQ((std::array<std::uint8_t, 8>{1, 2, 3, 4, 0, 0, 0, 0}), bytes);
  store_big_endian(bytes.data(), std::uint16_t{0xa0b0});
  EXPECT_EQ(0xa0, bytes[0]);
  EXPECT_EQ(0xb0, bytes[1]);
  EXPECT_EQ(3, bytes[2]);  // a 16-bit field writes two bytes, no more
}

TEST(BigEndian, RoundTripsEveryWidthAndByteType) {
  std::array<std::byte, 8> bytes{};
  store_big_endian(bytes.data(), std::uint64_t{0x0102030405060708});
  EXPECT_EQ(std::byte{0x01}, bytes[0]);
  EXPECT_EQ(std::byte{0x08}, bytes[7]);
  EXPECT_EQ(0x0102030405060708u, load_big_endian<std::uint64_t>(bytes.data()));
  EXPECT_EQ(0x01020304u, load_big_endian<std::uint32_t>(bytes.data()));
  std::array<std::uint8_t, 2> small{};
  store_big_endian(small.data(), std::uint16_t{0xffff});
  EXPECT_EQ(0xffffu, load_big_endian<std::uint16_t>(small.data()));
}

}  // namespace
}  // namespace rdmakit
