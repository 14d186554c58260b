// One host's view for diag-connect from what lib/diag reads: diag-bind's captured hosts
// (tests/fixtures/diag), the procfs/sysfs/configfs files beside them (tests/fixtures/host_view)
// and rulesets captured from `nft -j` (tests/fixtures/nft/capture.sh).

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "lib/diag/host_view_read.hpp"

namespace rdmakit::diag {
namespace {

namespace fs = std::filesystem;

const fs::path fixture_root = fs::path(RDMAKIT_SOURCE_DIR) / "tests" / "fixtures";

const ViewNetdev* netdev_named(const HostView& view, const std::string& name) {
  const auto it =
      std::find_if(view.netdevs.begin(), view.netdevs.end(), [&](const ViewNetdev& n) { return n.name == name; });
  return it == view.netdevs.end() ? nullptr : &*it;
}

TEST(HostViewFrom, MapsDevicesPortsGidsAndNetdevs) {
  const auto view = view_from(load_replay(fixture_root / "diag" / "ok").inventory);
  ASSERT_EQ(view.devices.size(), 1u);
  const auto& device = view.devices[0];
  EXPECT_EQ(device.name, "rxe0");
  EXPECT_EQ(device.netdev, "rxenet0");
  ASSERT_EQ(device.ports.size(), 1u);
  const auto& port = device.ports[0];
  EXPECT_EQ(port.number, 1);
  EXPECT_EQ(port.state, "ACTIVE");
  EXPECT_EQ(port.active_mtu, 1024);  // from the user-space view
  EXPECT_EQ(port.link_layer, "Ethernet");
  EXPECT_EQ(port.roce_mode, "");  // read_net_files' part
  ASSERT_EQ(port.gids.size(), 4u);
  EXPECT_EQ(port.gids[1].gid, "::ffff:10.55.0.1");
  EXPECT_EQ(port.gids[1].type, "RoCE v2");
  EXPECT_EQ(port.gids[1].netdev, "rxenet0");

  ASSERT_EQ(view.netdevs.size(), 3u);
  const auto* rxenet0 = netdev_named(view, "rxenet0");
  ASSERT_NE(rxenet0, nullptr);
  EXPECT_TRUE(rxenet0->up);
  EXPECT_EQ(rxenet0->mtu, 1500);
  EXPECT_EQ(rxenet0->operstate, "unknown");
  EXPECT_EQ(rxenet0->addresses.front(), "10.55.0.1/24");
  EXPECT_EQ(rxenet0->rp_filter, -1);
  EXPECT_EQ(rxenet0->mac, "");
  EXPECT_TRUE(view.host_name.empty());
  EXPECT_FALSE(view.listeners_known);
}

TEST(HostViewFrom, EachDeviceKeepsItsOwnNetdevAndPortState) {
  const auto several = view_from(load_replay(fixture_root / "diag" / "several_devices").inventory);
  ASSERT_EQ(several.devices.size(), 2u);
  EXPECT_EQ(several.devices[0].name, "rxe0");
  EXPECT_EQ(several.devices[0].netdev, "rxenet0");
  EXPECT_EQ(several.devices[1].name, "rxe1");
  EXPECT_EQ(several.devices[1].netdev, "plainnet0");

  const auto port_down = view_from(load_replay(fixture_root / "diag" / "port_not_active").inventory);
  ASSERT_EQ(port_down.devices.size(), 1u);
  EXPECT_EQ(port_down.devices[0].ports.at(0).state, "DOWN");

  EXPECT_TRUE(view_from(load_replay(fixture_root / "diag" / "no_rdma_device").inventory).devices.empty());
}

// Hardware RoCE devices have no parent netdev: each takes its GIDs' first, mlx5_1 the second
// PF's netdev and a LAG the bond, whose VLAN still finds the port through the GIDs.
TEST(HostViewFrom, HardwareDevicesTakeTheirGidsNetdev) {
  const auto dual = view_from(load_replay(fixture_root / "diag" / "ok_dual_port").inventory);
  ASSERT_EQ(dual.devices.size(), 2u);
  EXPECT_EQ(dual.devices[0].netdev, "ens2f0np0");
  EXPECT_EQ(dual.devices[1].netdev, "ens2f1np1");
  EXPECT_EQ(dual.devices[1].driver, "mlx5_core");
  EXPECT_EQ(dual.devices[1].ports.at(0).active_mtu, 4096);

  const auto lag = view_from(load_replay(fixture_root / "diag" / "ok_roce_bond_vlan").inventory);
  ASSERT_EQ(lag.devices.size(), 1u);
  EXPECT_EQ(lag.devices[0].netdev, "bond0");
  ASSERT_NE(netdev_named(lag, "bond0.100"), nullptr);
  EXPECT_EQ(netdev_named(lag, "bond0.100")->addresses.front(), "10.70.0.11/24");
}

// An iWARP port has no RoCE mode: rdma_cm's configfs would show "IB/RoCE v1" for it, and no
// entry there does not make it RoCE v2.
TEST(HostViewNetFiles, AnIwarpPortHasNoRoceMode) {
  auto view = view_from(load_replay(fixture_root / "diag" / "ok_iwarp_irdma").inventory);
  read_net_files("/nonexistent-proc", "/nonexistent-sys", "/nonexistent-configfs", view);
  ASSERT_EQ(view.devices.size(), 1u);
  EXPECT_EQ(view.devices[0].netdev, "ens801f0");
  EXPECT_EQ(view.devices[0].ports.at(0).roce_mode, "");
}

TEST(HostViewFrom, WithoutAParentTheNetdevComesFromTheGids) {
  Inventory inventory;
  KernelDevice device;
  device.name = "mlx5_0";
  KernelPort port;
  port.number = 1;
  port.state = "ACTIVE";
  port.link_layer = "Ethernet";
  port.gids.push_back({.index = 0, .gid = "fe80::1", .type = "RoCE v1", .netdev = "ens1f0"});
  device.ports.push_back(port);
  inventory.kernel_devices.push_back(device);
  inventory.kernel_devices.push_back(device);
  inventory.kernel_devices.back().name = "ibp0";
  inventory.kernel_devices.back().ports.clear();  // no GIDs: unknown
  const auto view = view_from(inventory);
  ASSERT_EQ(view.devices.size(), 2u);
  EXPECT_EQ(view.devices[0].netdev, "ens1f0");
  EXPECT_EQ(view.devices[0].ports.at(0).active_mtu, 0);  // no user-space view: unknown
  EXPECT_EQ(view.devices[1].netdev, "");
}

TEST(HostViewNetFiles, ReadsRpFilterMacsAndRoceModes) {
  auto view = view_from(load_replay(fixture_root / "diag" / "several_devices").inventory);
  const auto root = fixture_root / "host_view";
  read_net_files(root / "proc", root / "sys", root / "configfs", view);
  EXPECT_EQ(view.rp_filter_all, 0);
  EXPECT_EQ(netdev_named(view, "rxenet0")->rp_filter, 1);
  EXPECT_EQ(netdev_named(view, "plainnet0")->rp_filter, 2);
  EXPECT_EQ(netdev_named(view, "lo")->rp_filter, -1);  // not a number
  EXPECT_EQ(netdev_named(view, "rxenet0")->mac, "4a:92:af:e6:a7:ee");
  EXPECT_EQ(netdev_named(view, "lo")->mac, "");
  ASSERT_EQ(view.devices.size(), 2u);
  EXPECT_EQ(view.devices[0].ports.at(0).roce_mode, "RoCE v2");  // no configfs entry: the kernel's default
  EXPECT_EQ(view.devices[1].ports.at(0).roce_mode, "IB/RoCE v1");
}

TEST(HostViewNetFiles, NothingReadableLeavesUnknowns) {
  auto view = view_from(load_replay(fixture_root / "diag" / "ok").inventory);
  view.devices.push_back(ViewDevice{.name = "mlx5_ib", .netdev = {}, .ports = {ViewPort{}}, .driver = "mlx5_core"});
  view.devices.back().ports[0].link_layer = "InfiniBand";
  // An entry that exists but does not read (here a directory) tells nothing.
  const auto configfs = fs::temp_directory_path() / ("rdmakit-configfs-" + std::to_string(::getpid()));
  fs::create_directories(configfs / "rdma_cm" / "rxe0" / "ports" / "1" / "default_roce_mode");
  read_net_files("/nonexistent-proc", "/nonexistent-sys", configfs, view);
  fs::remove_all(configfs);
  EXPECT_EQ(view.rp_filter_all, -1);
  EXPECT_EQ(netdev_named(view, "rxenet0")->rp_filter, -1);
  EXPECT_EQ(netdev_named(view, "rxenet0")->mac, "");
  EXPECT_EQ(view.devices[0].ports.at(0).roce_mode, "");
  EXPECT_EQ(view.devices[1].ports.at(0).roce_mode, "");  // InfiniBand has no RoCE mode
}

nlohmann::json nft_fixture(const std::string& name) {
  std::ifstream in(fixture_root / "nft" / (name + ".json"));
  return nlohmann::json::parse(in);
}

const FirewallRule* rule_with_handle(const Firewall& firewall, std::int64_t handle) {
  const auto it = std::find_if(firewall.rules.begin(), firewall.rules.end(),
                               [&](const FirewallRule& rule) { return rule.handle == handle; });
  return it == firewall.rules.end() ? nullptr : &*it;
}

TEST(HostViewFirewall, FindsEveryRuleThatAdmitsUdp4791) {
  const auto firewall = firewall_from_nft_json(nft_fixture("roce_rules"));
  ASSERT_TRUE(firewall.readable);
  EXPECT_EQ(firewall.error, "");
  // Handles as tests/fixtures/nft/roce_rules.json holds them, in the order of roce_rules.nft.
  const struct {
    std::int64_t handle;
    const char* verdict;
    const char* text;
  } expected[] = {
      {8, "drop", "udp dport 4791 drop"},
      {9, "reject", "udp dport 4791 counter reject"},
      {11, "drop", "udp dport { 4791, 4792 } drop"},
      {12, "drop", "udp dport 4000-5000 drop"},
      {13, "accept", "ip saddr 10.57.0.0/24 udp dport 4791 accept"},
      {14, "drop", "th dport 4791 drop"},
      {15, "drop", "udp sport 4791 drop"},
      {19, "drop", "udp dport @roce_ports drop"},
      {20, "reject", "udp dport @roce_ranges reject"},
      {21, "drop", "udp dport != 53 drop"},
      {23, "", "udp dport 4791 jump input_extra"},
  };
  ASSERT_EQ(firewall.rules.size(), std::size(expected));
  for (const auto& e : expected) {
    const auto* rule = rule_with_handle(firewall, e.handle);
    ASSERT_NE(rule, nullptr) << "handle " << e.handle << " (" << e.text << ")";
    EXPECT_EQ(rule->verdict, e.verdict) << e.text;
    EXPECT_EQ(rule->text, e.text);
    EXPECT_EQ(rule->family, "inet");
    EXPECT_EQ(rule->table, "rdmakit_test");
  }
  EXPECT_EQ(rule_with_handle(firewall, 8)->chain, "input");
  EXPECT_EQ(rule_with_handle(firewall, 8)->hook, "input");
  EXPECT_EQ(rule_with_handle(firewall, 23)->chain, "forward_rules");
  EXPECT_EQ(rule_with_handle(firewall, 23)->hook, "");  // a regular chain
  // Near misses: iifname, tcp, another UDP port, "!= 4791", the set {53, 123} elsewhere.
  for (const std::int64_t handle : {7, 16, 17, 18, 22})
    EXPECT_EQ(rule_with_handle(firewall, handle), nullptr) << handle;
  EXPECT_EQ(firewall.drop_policy_chains, std::vector<std::string>{"inet rdmakit_test input"});
}

TEST(HostViewFirewall, AFirewallThatLeavesRoceAloneHasNoRules) {
  const auto firewall = firewall_from_nft_json(nft_fixture("no_roce_rule"));
  EXPECT_TRUE(firewall.readable);
  EXPECT_TRUE(firewall.rules.empty());
  EXPECT_TRUE(firewall.drop_policy_chains.empty());
  const auto empty = firewall_from_nft_json(nlohmann::json::parse(R"({"nftables": [{"metainfo": {}}]})"));
  EXPECT_TRUE(empty.readable);
  EXPECT_TRUE(empty.rules.empty());
}

TEST(HostViewFirewall, OtherDocumentsAreNotReadableAndNeverThrow) {
  for (const char* text : {R"([])", R"({"nftables": {}})", R"("ruleset")", R"(null)"}) {
    const auto firewall = firewall_from_nft_json(nlohmann::json::parse(text));
    EXPECT_FALSE(firewall.readable) << text;
    EXPECT_NE(firewall.error, "") << text;
  }
  // Members of the wrong types inside a valid list are skipped, not trusted.
  const auto odd = firewall_from_nft_json(nlohmann::json::parse(R"({"nftables": [
      5, "rule", {"rule": []}, {"rule": {"expr": {}}}, {"chain": {"policy": 1}},
      {"rule": {"family": "ip", "table": "t", "chain": "c", "handle": "7", "expr": [
        {"match": {"op": "==", "left": {"payload": {"protocol": "udp", "field": "dport"}}, "right": {"range": [4791]}}},
        {"match": {"op": "==", "left": [], "right": 4791}}, {"drop": null}]}},
      {"rule": {"family": "ip", "table": "t", "chain": "c", "handle": 9, "expr": [
        {"match": {"op": "<", "left": {"payload": {"protocol": "udp", "field": "dport"}}, "right": 5000}},
        {}, 3, {"drop": null}]}}]})"));
  EXPECT_TRUE(odd.readable);
  ASSERT_EQ(odd.rules.size(), 1u);
  EXPECT_EQ(odd.rules[0].handle, 9);
  EXPECT_EQ(odd.rules[0].verdict, "drop");
  EXPECT_EQ(odd.rules[0].text, "udp dport < 5000 {} 3 drop");
}

}  // namespace
}  // namespace rdmakit::diag
