// Which address rdma_mesh's rank takes when it is given none (lib/diag/address_choice).

#include "lib/diag/address_choice.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "lib/diag/diagnosis.hpp"

namespace rdmakit::diag {
namespace {

constexpr int active = 4;
constexpr int down = 1;

KernelPort port(int number, int state, const std::string& netdev) {
  KernelPort p;
  p.number = number;
  p.state_code = state;
  if (!netdev.empty()) p.gids.push_back(GidEntry{.index = 0, .gid = "fe80::1", .type = "RoCE v2", .netdev = netdev});
  return p;
}

Netdev netdev(const std::string& name, std::vector<std::string> addresses) {
  Netdev n;
  n.name = name;
  n.up = true;
  n.addresses = std::move(addresses);
  return n;
}

// Two devices: mlx0 with its port down, rxe0 on rxenet0; a netdev without RDMA beside them.
Inventory two_devices() {
  Inventory inventory;
  KernelDevice mlx;
  mlx.name = "mlx0";
  mlx.ports = {port(1, down, "eth1")};
  KernelDevice rxe;
  rxe.name = "rxe0";
  rxe.parent_netdev = "rxenet0";
  rxe.ports = {port(1, active, "")};
  inventory.kernel_devices = {mlx, rxe};
  inventory.netdevs = {netdev("eth1", {"192.168.7.1/24"}),
                       netdev("rxenet0", {"fe80::5/64", "fd55::1/64", "10.55.0.1/24"}),
                       netdev("plainnet0", {"10.56.0.1/24"}), netdev("bare0", {})};
  return inventory;
}

TEST(ChooseAddress, AutomaticTakesTheFirstActivePortAndItsIpv4Address) {
  const auto choice = choose_address(two_devices(), "", "");
  EXPECT_EQ(choice.address, "10.55.0.1");
  EXPECT_EQ(choice.how, "rxe0 port 1 (rxenet0), the first ACTIVE port with an address");
  EXPECT_TRUE(choice.problem.empty());
}

// InfiniBand (tests/fixtures/diag/ok_infiniband): the port's GIDs name no netdev; its IPoIB
// netdev, ib0, is known by its hardware address (the port GID), so a rank or rdma_smoke given
// no address takes ib0's, not no_address (issue 54).
TEST(ChooseAddress, InfinibandTakesTheIpoibNetdevsAddress) {
  const auto replay = load_replay(std::filesystem::path(RDMAKIT_DIAG_FIXTURES) / "ok_infiniband");
  const auto choice = choose_address(replay.inventory, "", "");
  EXPECT_EQ(choice.address, "10.60.0.1");
  EXPECT_TRUE(choice.problem.empty()) << choice.problem;
  EXPECT_NE(choice.how.find("ib0"), std::string::npos) << choice.how;
}

TEST(ChooseAddress, GlobalIpv6WhenTheNetdevHasNoIpv4) {
  auto inventory = two_devices();
  inventory.netdevs[1].addresses = {"fe80::5/64", "fd55::1/64"};
  EXPECT_EQ(choose_address(inventory, "", "").address, "fd55::1");
  inventory.netdevs[1].addresses = {"fe80::5/64"};
  const auto none = choose_address(inventory, "", "");
  EXPECT_TRUE(none.address.empty());
  EXPECT_EQ(none.problem, "no RDMA device has an ACTIVE port on a netdev with an address");
}

TEST(ChooseAddress, NetdevIsTakenEvenWithoutRdmaSoThatBindingSaysWhy) {
  const auto choice = choose_address(two_devices(), "plainnet0", "");
  EXPECT_EQ(choice.address, "10.56.0.1");
  EXPECT_EQ(choice.how, "the first address of plainnet0");
  EXPECT_EQ(choose_address(two_devices(), "nosuch0", "").problem, "no netdev named nosuch0");
  EXPECT_EQ(choose_address(two_devices(), "bare0", "").problem, "bare0 has no address");
}

TEST(ChooseAddress, DeviceNeedsAnActivePort) {
  EXPECT_EQ(choose_address(two_devices(), "", "rxe0").address, "10.55.0.1");
  EXPECT_EQ(choose_address(two_devices(), "", "rxe0").how, "rxe0 port 1 (rxenet0)");
  EXPECT_EQ(choose_address(two_devices(), "", "mlx0").problem, "mlx0 has no ACTIVE port on a netdev with an address");
  EXPECT_EQ(choose_address(two_devices(), "", "nosuch").problem, "no RDMA device named nosuch");
}

TEST(ChooseAddress, NoDeviceAtAll) {
  Inventory empty;
  EXPECT_EQ(choose_address(empty, "", "").problem, "no RDMA device");
}

}  // namespace
}  // namespace rdmakit::diag
