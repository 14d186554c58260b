// lib/rdma/datagram_port's reading of the 40 bytes in front of a UD datagram: who sent it.

#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "lib/rdma/datagram_port.hpp"

namespace rdmakit {
namespace {

using Header = std::array<std::uint8_t, grh_bytes>;

// An IPv4 header from 10.57.0.2 to 10.57.0.1 in the last 20 bytes, its checksum filled in.
Header ipv4_header() {
  Header header{};
  const std::array<std::uint8_t, 20> ip = {0x45, 0, 0,  76, 0x12, 0x34, 0x40, 0,  64, 17,
                                           0,    0, 10, 57, 0,    2,    10,   57, 0,  1};
  std::copy(ip.begin(), ip.end(), header.begin() + 20);
  std::uint32_t sum = 0;
  for (std::size_t k = 20; k < 40; k += 2) sum += (std::uint32_t{header[k]} << 8) | header[k + 1];
  while ((sum >> 16) != 0) sum = (sum & 0xffff) + (sum >> 16);
  const auto checksum = static_cast<std::uint16_t>(~sum);
  header[30] = static_cast<std::uint8_t>(checksum >> 8);
  header[31] = static_cast<std::uint8_t>(checksum);
  return header;
}

TEST(DatagramSource, RoceV2OverIpv4ReadsTheIpHeader) {
  EXPECT_EQ(grh_source_address(ipv4_header()), "10.57.0.2");
}

TEST(DatagramSource, RxeLeavesTheChecksumZero) {
  auto header = ipv4_header();
  header[30] = 0;
  header[31] = 0;
  EXPECT_EQ(grh_source_address(header), "10.57.0.2");
}

TEST(DatagramSource, NeitherAnIpv4HeaderNorAGrhIsNoAddress) {
  EXPECT_EQ(grh_source_address(Header{}), "");
}

TEST(DatagramSource, AGrhGivesItsSourceGid) {
  Header header{};
  header[0] = 0x60;  // IP version 6
  const std::array<std::uint8_t, 16> mapped = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 55, 0, 2};
  std::copy(mapped.begin(), mapped.end(), header.begin() + 8);
  EXPECT_EQ(grh_source_address(header), "10.55.0.2");
  const std::array<std::uint8_t, 16> v6 = {0xfd, 0x57, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  std::copy(v6.begin(), v6.end(), header.begin() + 8);
  EXPECT_EQ(grh_source_address(header), "fd57::2");
}

}  // namespace
}  // namespace rdmakit
