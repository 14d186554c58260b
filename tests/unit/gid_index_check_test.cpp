// send_bw -x: which indexes are warned about, and which entry the warning names instead.

#include "lib/send_bw/gid_index_check.hpp"

#include <gtest/gtest.h>

#include "tests/unit/gid_tables.hpp"

namespace rdmakit {
namespace {

TEST(GidIndexCheck, LinkLocalNamesTheRoutableEntryOnItsNetdev) {
  const auto warning = gid_index_warning(test::guest_rxe0(), 0, "");
  ASSERT_TRUE(warning);
  EXPECT_EQ(*warning,
            "-x 0: index 0 is link-local fe80::6cc4:c4ff:fe8d:1ad5 (RoCE v2), which no router forwards; "
            "-x 1 (::ffff:10.55.0.1 RoCE v2) is this host's routable entry on rxenet0");
}

TEST(GidIndexCheck, AClientPrefersThePeersFamily) {
  EXPECT_EQ(routable_gid(test::guest_rxe0(), 0, "10.55.0.9")->index, 1U);
  EXPECT_EQ(routable_gid(test::guest_rxe0(), 0, "fd55::9")->index, 3U);
  // A name says nothing of the family: the lowest index.
  EXPECT_EQ(routable_gid(test::guest_rxe0(), 0, "peer.example")->index, 1U);
  const auto warning = gid_index_warning(test::guest_rxe0(), 0, "fd55::2");
  ASSERT_TRUE(warning);
  EXPECT_NE(warning->find("; -x 3 (fd55::1 RoCE v2) is this host's routable entry on rxenet0"), std::string::npos);
}

TEST(GidIndexCheck, RoutableEntriesPass) {
  for (const std::uint32_t index : {1U, 2U, 3U, 5U}) EXPECT_FALSE(gid_index_warning(test::guest_rxe0(), index, ""));
  // Another family than the peer's is rdma_cm's to refuse, not this check's.
  EXPECT_FALSE(gid_index_warning(test::guest_rxe0(), 3, "10.55.0.9"));
  EXPECT_FALSE(gid_index_warning(test::dual_mlx5(), 3, ""));
}

TEST(GidIndexCheck, RoceV1NamesItsV2Twin) {
  const auto warning = gid_index_warning(test::dual_mlx5(), 2, "");
  ASSERT_TRUE(warning);
  EXPECT_EQ(*warning,
            "-x 2: index 2 is RoCE v1 ::ffff:192.168.1.5, not RoCE v2; "
            "-x 3 (::ffff:192.168.1.5 RoCE v2) is this host's routable entry on ens1");
  // An address with only a RoCE v1 entry: the netdev's RoCE v2 entry of another address.
  EXPECT_EQ(routable_gid(test::dual_mlx5(), 4, "")->index, 3U);
  EXPECT_TRUE(gid_index_warning(test::dual_mlx5(), 4, ""));
}

TEST(GidIndexCheck, LinkLocalRoceV1) {
  const auto warning = gid_index_warning(test::dual_mlx5(), 0, "");
  ASSERT_TRUE(warning);
  EXPECT_EQ(warning->rfind("-x 0: index 0 is link-local fe80::1 (RoCE v1)", 0), 0U);
  EXPECT_NE(warning->find("-x 3 (::ffff:192.168.1.5 RoCE v2)"), std::string::npos);
}

TEST(GidIndexCheck, RoceV1WithoutAV2EntryPasses) {
  const GidPort v1_only{.device = "mlx4_0", .port = 1, .gids = {{0, "::ffff:10.0.0.1", "RoCE v1", "eth2"}}};
  EXPECT_FALSE(gid_index_warning(v1_only, 0, ""));
}

TEST(GidIndexCheck, OnlyTheEntrysNetdev) {
  GidPort port = test::guest_rxe0();
  port.gids.push_back({6, "fe80::1", "RoCE v2", "rxenet0.100"});
  EXPECT_EQ(routable_gid(port, 6, "")->index, 5U);
  EXPECT_EQ(routable_gid(port, 6, "10.55.0.9")->index, 5U);
}

TEST(GidIndexCheck, NoRoutableEntry) {
  const GidPort bare{.device = "rxe1", .port = 1, .gids = {{0, "fe80::2", "RoCE v2", "eth9"}}};
  const auto warning = gid_index_warning(bare, 0, "");
  ASSERT_TRUE(warning);
  EXPECT_NE(warning->find("; rxe1 port 1 has no routable RoCE v2 entry on eth9"), std::string::npos);
}

TEST(GidIndexCheck, EmptyIndexIsLeftToTheQueryWithAdvice) {
  EXPECT_FALSE(gid_index_warning(test::guest_rxe0(), 4, ""));
  EXPECT_EQ(routable_gid_advice(test::guest_rxe0(), 4, "10.55.0.9"),
            "-x 1 (::ffff:10.55.0.1 RoCE v2) is this host's routable entry on rxenet0");
  EXPECT_EQ(routable_gid_advice(test::guest_rxe0(), 4, "fd55::2"),
            "-x 3 (fd55::1 RoCE v2) is this host's routable entry on rxenet0");
}

TEST(GidIndexCheck, InfinibandIsNotWarnedAbout) {
  const GidPort ib{.device = "mlx5_1", .port = 1, .gids = {{0, "fe80::248a:703:49:d4f0", "IB", ""}}};
  EXPECT_FALSE(gid_index_warning(ib, 0, ""));
}

}  // namespace
}  // namespace rdmakit
