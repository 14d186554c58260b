// diag-bind --gids from fixture trees (tests/fixtures/diag): the rows as show_gids has them,
// the VLAN ids beside them, the advice for an address of this host and for one it routes to,
// and the JSON other tests read (.advice.index).

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include "lib/base/error.hpp"
#include "lib/diag/gid_table.hpp"
#include "lib/diag/host_queries.hpp"

namespace rdmakit::diag {
namespace {

namespace fs = std::filesystem;

const fs::path gid_table_fixtures = RDMAKIT_DIAG_FIXTURES;

Replay table_fixture(const std::string& name) {
  return load_replay(gid_table_fixtures / name);
}

// The ok host with the VLAN the guest gets from `ip link add link rxenet0 name rxenet0.100 type
// vlan id 100` and 10.66.0.1/24 on it: rxe0 then has entries 5 and 6 on rxenet0.100.
Inventory vlan_host() {
  auto inventory = table_fixture("ok").inventory;
  inventory.netdevs.push_back({.name = "rxenet0.100",
                               .ifindex = 9,
                               .type = "ether",
                               .operstate = "up",
                               .up = true,
                               .mtu = 1500,
                               .addresses = {"10.66.0.1/24", "fe80::4892:afff:fee6:a7ee/64"},
                               .vlan = 100,
                               .ipoib_gid = {},
                               .bus_device = {}});
  auto& gids = inventory.kernel_devices.at(0).ports.at(0).gids;
  gids.push_back({.index = 5, .gid = "fe80::4892:afff:fee6:a7ee", .type = "RoCE v2", .netdev = "rxenet0.100"});
  gids.push_back({.index = 6, .gid = "::ffff:10.66.0.1", .type = "RoCE v2", .netdev = "rxenet0.100"});
  return inventory;
}

TEST(GidTable, RowsOfTheOkHost) {
  const auto rows = gid_rows(table_fixture("ok").inventory);
  ASSERT_EQ(rows.size(), 4U);
  const char* const gids[] = {"fe80::4892:afff:fee6:a7ee", "::ffff:10.55.0.1", "::ffff:10.55.0.2", "fd55::1"};
  const char* const ipv4[] = {"", "10.55.0.1", "10.55.0.2", ""};
  for (std::uint32_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(rows[i].device, "rxe0");
    EXPECT_EQ(rows[i].port, 1);
    EXPECT_EQ(rows[i].entry.index, i);
    EXPECT_EQ(rows[i].entry.gid, gids[i]);
    EXPECT_EQ(rows[i].entry.type, "RoCE v2");
    EXPECT_EQ(rows[i].entry.netdev, "rxenet0");
    EXPECT_EQ(rows[i].ipv4, ipv4[i]);
    EXPECT_EQ(rows[i].vlan, std::nullopt);
    EXPECT_EQ(rows[i].link_local, i == 0);
  }
}

TEST(GidTable, EveryDeviceAndPort) {
  const auto replay = table_fixture("several_devices");
  std::size_t entries = 0;
  for (const auto& device : replay.inventory.kernel_devices) {
    for (const auto& port : device.ports) entries += port.gids.size();
  }
  const auto rows = gid_rows(replay.inventory);
  EXPECT_EQ(rows.size(), entries);
  EXPECT_GT(gid_ports(replay.inventory).size(), 1U);
}

TEST(GidTable, VlanNetdevsCarryTheirId) {
  const auto rows = gid_rows(vlan_host());
  ASSERT_EQ(rows.size(), 6U);
  EXPECT_EQ(rows[4].entry.index, 5U);
  EXPECT_EQ(rows[4].vlan, 100);
  EXPECT_TRUE(rows[4].link_local);
  EXPECT_EQ(rows[5].ipv4, "10.66.0.1");
  EXPECT_EQ(rows[5].vlan, 100);
  EXPECT_EQ(rows[1].vlan, std::nullopt);
  const auto text = render_gid_table(rows);
  EXPECT_NE(text.find("rxenet0.100     100"), std::string::npos) << text;
}

TEST(GidTable, ParsesProcNetVlanConfig) {
  const auto vlans = parse_vlan_config(
      "VLAN Dev name\t | VLAN ID\n"
      "Name-Type: VLAN_NAME_TYPE_RAW_PLUS_VID_NO_PAD\n"
      "rxenet0.100    | 100  | rxenet0\n"
      "eth1.7         | 7  | eth1\n"
      "broken         | x  | eth1\n");
  EXPECT_EQ(vlans, (std::map<std::string, int>{{"eth1.7", 7}, {"rxenet0.100", 100}}));
  EXPECT_TRUE(parse_vlan_config("").empty());
}

TEST(GidTable, FactsCarryVlanIdsStrictly) {
  auto replay = table_fixture("ok");
  Attempt attempt;
  apply_facts(nlohmann::json{{"vlans", {{"rxenet0", 7}, {"nosuch0", 8}}}}, replay.inventory, attempt);
  const auto* rxenet0 = netdev_owning(replay.inventory, "10.55.0.1");
  ASSERT_NE(rxenet0, nullptr);
  EXPECT_EQ(rxenet0->vlan, 7);
  EXPECT_THROW(apply_facts(nlohmann::json{{"vlans", {{"rxenet0", "7"}}}}, replay.inventory, attempt), UsageError);
  EXPECT_THROW(apply_facts(nlohmann::json{{"vlans", {1, 2}}}, replay.inventory, attempt), UsageError);
}

TEST(GidLookup, AnAddressOfThisHostGetsItsRoceV2Entry) {
  const auto inventory = table_fixture("ok").inventory;
  const auto v4 = look_up_gid(inventory, "10.55.0.1", "");
  EXPECT_EQ(v4.source, "10.55.0.1");
  ASSERT_TRUE(v4.advice.entry);
  EXPECT_EQ(v4.advice.entry->index, 1U);
  ASSERT_EQ(v4.settings.size(), 5U);
  EXPECT_EQ(v4.settings[0].setting, "-d rxe0 -i 1 -x 1");
  const auto v6 = look_up_gid(inventory, "fd55:0::1", "");
  ASSERT_TRUE(v6.advice.entry);
  EXPECT_EQ(v6.advice.entry->index, 3U);
  EXPECT_EQ(v6.address, "fd55::1");
  const auto vlan = look_up_gid(vlan_host(), "10.66.0.1", "");
  ASSERT_TRUE(vlan.advice.entry);
  EXPECT_EQ(vlan.advice.entry->index, 6U);
}

TEST(GidLookup, ARemoteAddressGetsItsRouteSourcesEntry) {
  const auto replay = table_fixture("address_not_local");
  const auto lookup = look_up_gid(replay.inventory, replay.address, replay.attempt.route_source);
  EXPECT_EQ(lookup.address, "10.55.0.99");
  EXPECT_EQ(lookup.source, "10.55.0.1");
  ASSERT_TRUE(lookup.advice.entry);
  EXPECT_EQ(lookup.advice.entry->index, 1U);
  EXPECT_NE(render_gid_lookup(lookup, SiblingNames{}).find("10.55.0.99 is reached from 10.55.0.1"), std::string::npos);
}

TEST(GidLookup, NoGidIsACause) {
  const auto inventory = table_fixture("ok").inventory;
  const auto plain = look_up_gid(inventory, "10.56.0.1", "");
  EXPECT_FALSE(plain.advice.entry);
  EXPECT_TRUE(plain.settings.empty());
  EXPECT_NE(render_gid_lookup(plain, SiblingNames{}).find("run 'diag-bind 10.56.0.1'"), std::string::npos);
  const GidReport report(gid_rows(inventory), plain, SiblingNames{});
  EXPECT_EQ(report.exit_code(), ExitCode::cause_found);
  EXPECT_EQ(report.outcome(), "no_gid");

  const auto unrouted = look_up_gid(inventory, "192.0.2.9", "");
  EXPECT_EQ(unrouted.source, "");
  EXPECT_FALSE(unrouted.advice.entry);
  EXPECT_NE(unrouted.advice.reason.find("no route to 192.0.2.9"), std::string::npos);
}

TEST(GidReport, JsonShape) {
  const auto inventory = vlan_host();
  nlohmann::json table;
  GidReport(gid_rows(inventory), std::nullopt, SiblingNames{}).add_to(table);
  EXPECT_FALSE(table.contains("advice"));
  ASSERT_EQ(table.at("gids").size(), 6U);
  EXPECT_EQ(table["gids"][0], (nlohmann::json{{"device", "rxe0"},
                                              {"port", 1},
                                              {"index", 0},
                                              {"gid", "fe80::4892:afff:fee6:a7ee"},
                                              {"ipv4", nullptr},
                                              {"type", "RoCE v2"},
                                              {"netdev", "rxenet0"},
                                              {"vlan", nullptr},
                                              {"link_local", true}}));
  EXPECT_EQ(table["gids"][5]["ipv4"], "10.66.0.1");
  EXPECT_EQ(table["gids"][5]["vlan"], 100);
  EXPECT_EQ(GidReport(gid_rows(inventory), std::nullopt, SiblingNames{}).outcome(), "ok");

  nlohmann::json found;
  const GidReport advised(gid_rows(inventory), look_up_gid(inventory, "10.55.0.1", ""), SiblingNames{});
  advised.add_to(found);
  EXPECT_EQ(advised.exit_code(), ExitCode::ok);
  const auto& advice = found.at("advice");
  EXPECT_EQ(advice.at("index"), 1);
  EXPECT_EQ(advice.at("address"), "10.55.0.1");
  EXPECT_EQ(advice.at("source"), "10.55.0.1");
  EXPECT_EQ(advice.at("device"), "rxe0");
  EXPECT_EQ(advice.at("port"), 1);
  EXPECT_EQ(advice.at("gid"), "::ffff:10.55.0.1");
  EXPECT_EQ(advice.at("type"), "RoCE v2");
  EXPECT_EQ(advice.at("settings").size(), 5U);
  EXPECT_EQ(advice["settings"][1],
            (nlohmann::json{{"stack", "NCCL"}, {"setting", "NCCL_IB_HCA=rxe0:1 NCCL_IB_GID_INDEX=1"}}));

  nlohmann::json none;
  GidReport(gid_rows(inventory), look_up_gid(inventory, "10.56.0.1", ""), SiblingNames{}).add_to(none);
  EXPECT_TRUE(none["advice"]["index"].is_null());
  EXPECT_TRUE(none["advice"]["port"].is_null());
  EXPECT_EQ(none["advice"]["settings"], nlohmann::json::array());
}

// IPoIB: the port's GID is in ib0's hardware address; 10.60.0.1 on ib0 gets that entry, and
// so does 10.61.0.1 on its P_Key child ib0.8001 (before, both had "no GID table entry": exit 1).
TEST(GidTable, AnIpoibAddressGetsItsPortsGid) {
  const auto inventory = table_fixture("ok_infiniband").inventory;
  const auto rows = gid_rows(inventory);
  ASSERT_EQ(rows.size(), 1U);
  EXPECT_EQ(rows[0].entry.netdev, "ib0");
  EXPECT_EQ(rows[0].entry.type, "IB");
  for (const char* address : {"10.60.0.1", "10.61.0.1"}) {
    SCOPED_TRACE(address);
    nlohmann::json found;
    const GidReport advised(rows, look_up_gid(inventory, address, ""), SiblingNames{});
    advised.add_to(found);
    EXPECT_EQ(advised.exit_code(), ExitCode::ok);
    EXPECT_EQ(found["advice"]["device"], "mlx5_0");
    EXPECT_EQ(found["advice"]["index"], 0);
    EXPECT_EQ(found["advice"]["gid"], "fe80::b859:9f03:c5:3d7a");
    EXPECT_NE(found["advice"]["reason"].get<std::string>().find("on InfiniBand the GID is the port's"),
              std::string::npos);
  }
}

// A RoCE LAG: bond0 holds the default (MAC) entries, bond0.100 its own fe80 pair and the
// address's; the address gets its RoCE v2 entry on the VLAN, which the table shows with its id.
TEST(GidLookup, AnAddressOnAVlanOfABondGetsItsRoceV2Entry) {
  const auto inventory = table_fixture("ok_roce_bond_vlan").inventory;
  const auto rows = gid_rows(inventory);
  ASSERT_EQ(rows.size(), 6U);
  for (const auto& row : rows) {
    SCOPED_TRACE(row.entry.index);
    EXPECT_EQ(row.device, "mlx5_bond_0");
    EXPECT_EQ(row.vlan, row.entry.netdev == "bond0.100" ? std::optional<int>(100) : std::nullopt);
  }
  EXPECT_EQ(rows[4].ipv4, "10.70.0.11");
  EXPECT_NE(render_gid_table(rows).find("bond0.100       100"), std::string::npos) << render_gid_table(rows);
  const auto lookup = look_up_gid(inventory, "10.70.0.11", "");
  ASSERT_TRUE(lookup.advice.entry);
  EXPECT_EQ(lookup.advice.device, "mlx5_bond_0");
  EXPECT_EQ(lookup.advice.port, 1);
  EXPECT_EQ(lookup.advice.entry->index, 5U);
  EXPECT_EQ(lookup.advice.entry->type, "RoCE v2");
  EXPECT_EQ(lookup.advice.entry->netdev, "bond0.100");
  ASSERT_FALSE(lookup.settings.empty());
  EXPECT_EQ(lookup.settings[0].setting, "-d mlx5_bond_0 -i 1 -x 5");
}

// One mlx5 device per PF: each address gets the entry of its own port's device.
TEST(GidLookup, EachPortsAddressGetsItsOwnDevice) {
  const auto inventory = table_fixture("ok_dual_port").inventory;
  EXPECT_EQ(gid_rows(inventory).size(), 8U);
  for (const auto& [address, device] : {std::pair{"10.71.0.11", "mlx5_0"}, std::pair{"10.72.0.11", "mlx5_1"}}) {
    SCOPED_TRACE(address);
    const auto lookup = look_up_gid(inventory, address, "");
    ASSERT_TRUE(lookup.advice.entry);
    EXPECT_EQ(lookup.advice.device, device);
    EXPECT_EQ(lookup.advice.entry->index, 3U);
    EXPECT_EQ(lookup.advice.entry->type, "RoCE v2");
  }
}

// iWARP ports have one entry: the netdev's MAC followed by zeros (irdma_query_gid,
// c4iw_query_gid), and since the kernel sets its ndev, gid_attrs/ndevs names the netdev.
TEST(GidTable, AnIwarpPortHoldsItsMacGid) {
  const auto irdma = gid_rows(table_fixture("ok_iwarp_irdma").inventory);
  ASSERT_EQ(irdma.size(), 1U);
  EXPECT_EQ(irdma[0].device, "iwp24s0f0");
  EXPECT_EQ(irdma[0].entry.gid, "b496:91a5:c8e0::");
  EXPECT_EQ(irdma[0].entry.netdev, "ens801f0");
  EXPECT_EQ(irdma[0].ipv4, "");
  EXPECT_FALSE(irdma[0].link_local);
  const auto cxgb4 = gid_rows(table_fixture("ok_iwarp_cxgb4").inventory);
  ASSERT_EQ(cxgb4.size(), 2U);
  EXPECT_EQ(cxgb4[0].port, 1);
  EXPECT_EQ(cxgb4[0].entry.netdev, "enp2s0f4");
  EXPECT_EQ(cxgb4[1].port, 2);
  EXPECT_EQ(cxgb4[1].entry.gid, "7:434a:5b68::");
  EXPECT_EQ(cxgb4[1].entry.netdev, "enp2s0f4d1");
}

// An iWARP address has no GID of its own and no stack needs an index for it: rdma_cm connects
// over TCP by address. The answer should say so (exit 0), as it does for IPoIB, not "no GID".
TEST(GidLookup, AnIwarpAddressNeedsNoIndex) {
  const auto inventory = table_fixture("ok_iwarp_irdma").inventory;
  const auto rows = gid_rows(inventory);
  ASSERT_EQ(rows.size(), 1U);
  EXPECT_EQ(rows[0].entry.type, "iWARP");
  nlohmann::json found;
  const GidReport advised(rows, look_up_gid(inventory, "10.73.0.11", ""), SiblingNames{});
  advised.add_to(found);
  EXPECT_EQ(advised.exit_code(), ExitCode::ok);
  EXPECT_EQ(found["advice"]["device"], "iwp24s0f0");
  EXPECT_EQ(found["advice"]["port"], 1);
  EXPECT_EQ(found["advice"]["index"], 0);
  EXPECT_NE(found["advice"]["reason"].get<std::string>().find("iWARP"), std::string::npos) << found.dump(2);
}

}  // namespace
}  // namespace rdmakit::diag
