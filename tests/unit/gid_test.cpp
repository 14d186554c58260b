// Which GID index the index-taking stacks should get, and what is wrong with the one they have.

#include "lib/rdma/gid.hpp"

#include <gtest/gtest.h>

#include "tests/unit/gid_tables.hpp"

namespace rdmakit {
namespace {

TEST(Gid, LinkLocalAndMapped) {
  EXPECT_TRUE(is_link_local({0, "fe80::1", "RoCE v2", "x"}));
  EXPECT_TRUE(is_link_local({0, "febf::1%eth0", "RoCE v2", "x"}));
  EXPECT_FALSE(is_link_local({0, "fec0::1", "RoCE v2", "x"}));
  EXPECT_FALSE(is_link_local({0, "::ffff:10.0.0.1", "RoCE v2", "x"}));
  EXPECT_EQ(ipv4_of({0, "::ffff:10.55.0.1", "RoCE v2", ""}), "10.55.0.1");
  EXPECT_EQ(ipv4_of({0, "fd55::1", "RoCE v2", ""}), "");
  EXPECT_EQ(entry_address({0, "::ffff:10.55.0.1", "RoCE v2", ""}), "10.55.0.1");
  EXPECT_EQ(entry_address({0, "fd55:0::1", "RoCE v2", ""}), "fd55::1");
  EXPECT_EQ(entry_address({0, "fe80::1", "RoCE v2", "eth0"}), "fe80::1");
  EXPECT_EQ(gid_for_address("10.55.0.1"), "::ffff:10.55.0.1");
  EXPECT_EQ(gid_for_address("fd55:0::1"), "fd55::1");
  EXPECT_EQ(canonical("fe80:0::1%eth0"), "fe80::1");
}

TEST(Gid, AdvisesTheAddressesOwnEntry) {
  const auto advice = advise_gid({test::guest_rxe0()}, "10.55.0.2");
  ASSERT_TRUE(advice.entry);
  EXPECT_EQ(advice.entry->index, 2U);
  EXPECT_EQ(advice.device, "rxe0");
  EXPECT_NE(advice.reason.find("RoCE v2"), std::string::npos);
  EXPECT_EQ(advise_gid({test::guest_rxe0()}, "fd55:0:0::1").entry->index, 3U);
}

TEST(Gid, PrefersRoceV2OverV1) {
  const auto advice = advise_gid({test::dual_mlx5()}, "192.168.1.5");
  ASSERT_TRUE(advice.entry);
  EXPECT_EQ(advice.entry->index, 3U);
  EXPECT_EQ(advice.entry->type, "RoCE v2");
}

TEST(Gid, NoEntryForAnAddressWithoutGid) {
  const auto advice = advise_gid({test::guest_rxe0(), test::dual_mlx5()}, "10.56.0.1");
  EXPECT_FALSE(advice.entry);
  EXPECT_NE(advice.reason.find("::ffff:10.56.0.1"), std::string::npos);
  EXPECT_TRUE(stack_settings(advice).empty());
}

TEST(Gid, StackSettingsNameDeviceIndexAndPort) {
  const auto settings = stack_settings(advise_gid({test::dual_mlx5()}, "192.168.1.5"));
  ASSERT_EQ(settings.size(), 5U);
  EXPECT_EQ(settings[0].setting, "-d mlx5_0 -i 1 -x 3");
  EXPECT_EQ(settings[1].setting, "NCCL_IB_HCA=mlx5_0:1 NCCL_IB_GID_INDEX=3");
  EXPECT_EQ(settings[2].setting, "UCX_NET_DEVICES=mlx5_0:1 UCX_IB_GID_INDEX=3");
}

TEST(Gid, IndexProblems) {
  const auto port = test::dual_mlx5();
  const auto advice = advise_gid({port}, "192.168.1.5");
  EXPECT_EQ(index_problem(port, 3, advice), "");
  EXPECT_NE(index_problem(port, 0, advice).find("link-local"), std::string::npos);
  EXPECT_NE(index_problem(port, 2, advice).find("RoCE v1"), std::string::npos);
  EXPECT_NE(index_problem(port, 9, advice).find("empty"), std::string::npos);
  const auto guest = test::guest_rxe0();
  const auto v4 = advise_gid({guest}, "10.55.0.1");
  EXPECT_EQ(index_problem(guest, 2, v4), "");  // another address on the same netdev routes alike
  EXPECT_NE(index_problem(guest, 3, v4).find("IPv6"), std::string::npos);
  EXPECT_NE(index_problem(guest, 5, v4).find("rxenet0.100"), std::string::npos);
}

}  // namespace
}  // namespace rdmakit
