// The diagnoser fed from fixture trees: sysfs copies and facts captured in the soft-RoCE VM
// under each failure (tests/fixtures/diag/capture-all.sh), plus edited copies for causes no
// guest can produce (derive.sh).

#include <gtest/gtest.h>

#include <algorithm>

#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "lib/base/error.hpp"
#include "lib/diag/diagnosis.hpp"
#include "lib/diag/sysfs.hpp"

namespace rdmakit::diag {
namespace {

namespace fs = std::filesystem;

const fs::path diag_fixtures = RDMAKIT_DIAG_FIXTURES;

struct Loaded {
  Target target;
  Inventory inventory;
  Attempt attempt;
};

// As diag-bind --replay reads a fixture.
Loaded load(const std::string& name) {
  auto replay = load_replay(diag_fixtures / name);
  Loaded loaded;
  loaded.inventory = std::move(replay.inventory);
  loaded.attempt = std::move(replay.attempt);
  loaded.target = make_target(replay.address, 0, "tcp");
  return loaded;
}

Verdict diagnose_fixture(const std::string& name) {
  const auto l = load(name);
  return diagnose(l.target, l.inventory, l.attempt, SiblingNames{});
}

struct Expectation {
  const char* fixture;
  const char* cause;
  int exit_code;
  const char* must_mention;  // in summary, fix or details
};

const Expectation expectations[] = {
    {"ok", "ok", 0, "GID index 1 (RoCE v2)"},
    {"ok_ipv6", "ok", 0, "GID index 3 (RoCE v2)"},
    // IB: ib0 is linked to its port through the GID in its hardware address.
    {"ok_infiniband", "ok", 0, "10.60.0.1 maps to mlx5_0 port 1 (netdev ib0), GID index 0 (IB)"},
    // IB's own causes (derive.sh, from ok_infiniband): the subnet manager's part.
    {"no_subnet_manager", "no_subnet_manager", 1, "INIT with LID 0 and SM LID 0"},
    {"pkey_mismatch", "pkey_mismatch", 1, "'p1=0x8001, ipoib : 0xb8599f0300c53d7a=full ;'"},
    {"no_path_record", "no_path_record", 1, "no path record came back (ETIMEDOUT)"},
    {"several_devices", "several_devices", 0, "-d rxe0"},
    {"wildcard_address", "wildcard_address", 0, "every RDMA device"},
    {"no_rdma_device", "no_rdma_device", 1, "type rxe netdev"},
    {"no_rdma_core", "no_rdma_device", 1, "no RDMA core"},
    {"netdev_without_rdma", "netdev_without_rdma", 1, "rdma link add rxe_plainnet0 type rxe netdev plainnet0"},
    {"route_without_rdma", "netdev_without_rdma", 1, "reached through plainnet0"},
    // Not a soft-RoCE fix where the netdev's own NIC has RoCE switched off, or on EFA.
    {"netdev_without_rdma-roce_disabled", "netdev_without_rdma", 1,
     "devlink dev param set pci/0000:3b:00.0 name enable_roce value true cmode driverinit"},
    {"netdev_without_rdma-efa", "netdev_without_rdma", 1, "efa_0 is EFA, which rdma_cm does not drive"},
    {"address_not_local", "address_not_local", 1, "EADDRNOTAVAIL"},
    {"no_route", "no_route", 1, "ENETUNREACH"},
    {"loopback_address", "loopback_address", 1, "rdma_resolve_route: ENODEV"},
    {"netdev_down", "netdev_down", 1, "ip link set rxenet0 up"},
    {"port_not_active", "port_not_active", 1, "Polling"},
    {"memlock_too_low", "memlock_too_low", 1, "the locked-memory limit is 64 KiB"},
    {"rdma_cm_missing", "rdma_cm_missing", 1, "/dev/infiniband/rdma_cm"},
    {"rdma_cm_permission", "rdma_cm_permission", 1, "EACCES"},
    {"provider_missing", "provider_missing", 1, "librxe"},
    {"uverbs_missing", "uverbs_unavailable", 1, "uverbs0 does not exist"},
    {"uverbs_permission", "uverbs_unavailable", 1, "uverbs0"},
    {"userspace_mismatch", "userspace_mismatch", 1, "0000:0000:dead:beef"},
    {"unexplained", "unknown", 3, "EINVAL"},
    {"gid_link_local", "gid_link_local", 1, "leaves by un0 (rxeu port 1)"},
    {"gid_link_local_ipv6", "gid_link_local", 1, "fd55::1 (on rxenet0)"},
    {"gid_missing", "gid_missing", 1, "full (1024 of 1024 entries)"},
    // Hardware no guest has (hand-made, each README says from what). A RoCE LAG: the address is on
    // a VLAN of the bond, whose GIDs come in v1/v2 pairs after the bond's own.
    {"ok_roce_bond_vlan", "ok", 0,
     "10.70.0.11 maps to mlx5_bond_0 port 1 (netdev bond0.100), GID index 4 (RoCE v1), 5 (RoCE v2)"},
    // iWARP RNICs: one GID, the port's MAC, and no GID for the address.
    {"ok_iwarp_irdma", "ok", 0, "the bind works: 10.73.0.11 belongs to iwp24s0f0 port 1"},
    {"ok_iwarp_cxgb4", "ok", 0, "the bind works: 10.74.0.11 belongs to cxgb4_0 port 1"},
    // mlx5 makes one device per PF: the second port's address is the second device's.
    {"ok_dual_port", "several_devices", 0, "-d mlx5_1 for this address (not mlx5_0)"},
};

void PrintTo(const Expectation& e, std::ostream* out) {
  *out << e.fixture;
}

bool mentions(const Verdict& v, const std::string& text) {
  for (const auto* field : {&v.summary, &v.fix, &v.next}) {
    if (field->find(text) != std::string::npos) return true;
  }
  for (const auto& detail : v.details) {
    if (detail.find(text) != std::string::npos) return true;
  }
  return false;
}

class DiagFixture : public testing::TestWithParam<Expectation> {};

TEST_P(DiagFixture, NamesTheCause) {
  const auto& e = GetParam();
  const auto v = diagnose_fixture(e.fixture);
  EXPECT_EQ(v.cause.name(), e.cause) << v.summary;
  EXPECT_EQ(static_cast<int>(v.exit_code), e.exit_code);
  EXPECT_TRUE(mentions(v, e.must_mention)) << "'" << e.must_mention << "' not in: " << render_verdict(v);
  if (v.exit_code == ExitCode::cause_found) {
    EXPECT_FALSE(v.fix.empty() && v.next.empty()) << "a named cause comes with a fix or a next step";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DiagFixture, testing::ValuesIn(expectations),
                         [](const testing::TestParamInfo<Expectation>& param) {
                           // gtest names take letters, digits and '_' only.
                           std::string name = param.param.fixture;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(DiagFixtures, EveryFixtureHasAnExpectation) {
  std::set<std::string> expected;
  for (const auto& e : expectations) expected.insert(e.fixture);
  for (const auto& entry : fs::directory_iterator(diag_fixtures)) {
    if (entry.is_directory()) {
      EXPECT_TRUE(expected.count(entry.path().filename().string())) << entry.path() << " is not checked";
    }
  }
}

// A route that leaves by un0, whose rxeu port has only its fe80 GID, from plainnet0's
// address: no fix (the address is the fabric's plan), the steps to take as next.
TEST(DiagGidVerdicts, LinkLocalRouteNamesTheNetdevThePortAndTheSource) {
  const auto v = diagnose_fixture("gid_link_local");
  EXPECT_EQ(v.cause.name(), "gid_link_local");
  EXPECT_EQ(v.exit_code, ExitCode::cause_found);
  EXPECT_NE(v.summary.find("leaves by un0 (rxeu port 1)"), std::string::npos) << v.summary;
  EXPECT_NE(v.summary.find("link-local (fe80::"), std::string::npos) << v.summary;
  EXPECT_NE(v.summary.find("10.56.0.1 (on plainnet0), has no GID on that port"), std::string::npos) << v.summary;
  EXPECT_NE(v.summary.find("rdma_resolve_addr fails with ENODEV"), std::string::npos) << v.summary;
  EXPECT_EQ(v.fix, "");
  EXPECT_NE(v.next.find("ip addr add ADDRESS/LEN dev un0"), std::string::npos) << v.next;
  EXPECT_NE(v.next.find("ip route replace PREFIX dev un0 src ADDRESS"), std::string::npos) << v.next;
  EXPECT_NE(v.next.find("diag-bind --gids ADDRESS"), std::string::npos) << v.next;
}

TEST(DiagGidVerdicts, LinkLocalRouteOverIpv6TakesIpDash6) {
  const auto v = diagnose_fixture("gid_link_local_ipv6");
  EXPECT_EQ(v.cause.name(), "gid_link_local");
  EXPECT_NE(v.next.find("ip -6 route replace PREFIX dev un0 src ADDRESS"), std::string::npos) << v.next;
}

TEST(DiagGidVerdicts, LinkLocalRouteThroughAGatewayNamesIt) {
  auto l = load("gid_link_local");
  l.attempt.route_gateway = "10.70.0.254";
  const auto v = diagnose(l.target, l.inventory, l.attempt, SiblingNames{});
  EXPECT_EQ(v.cause.name(), "gid_link_local");
  EXPECT_NE(v.summary.find("leaves by un0 via 10.70.0.254"), std::string::npos) << v.summary;
  EXPECT_NE(v.next.find("PREFIX via 10.70.0.254 dev un0 src ADDRESS"), std::string::npos) << v.next;
}

// Without the route's netdev (a report from before it was recorded) the rule cannot tell.
TEST(DiagGidVerdicts, LinkLocalNeedsTheRoutesNetdev) {
  auto l = load("gid_link_local");
  l.attempt.route_netdev.clear();
  EXPECT_EQ(diagnose(l.target, l.inventory, l.attempt, SiblingNames{}).cause.name(), "netdev_without_rdma");
}

// rxeg on gm0 with 1040 addresses: the table's 1024 entries end before 10.60.4.41.
TEST(DiagGidVerdicts, FullTableNamesItsFillAndFreeingAsNext) {
  const auto v = diagnose_fixture("gid_missing");
  EXPECT_EQ(v.cause.name(), "gid_missing");
  EXPECT_EQ(v.exit_code, ExitCode::cause_found);
  EXPECT_NE(v.summary.find("10.60.4.41 is on gm0, which carries rxeg port 1"), std::string::npos) << v.summary;
  EXPECT_NE(v.summary.find("no GID entry for it (::ffff:10.60.4.41)"), std::string::npos) << v.summary;
  EXPECT_NE(v.summary.find("rdma_bind_addr fails with ENODEV"), std::string::npos) << v.summary;
  EXPECT_EQ(v.fix, "");
  EXPECT_NE(v.next.find("ip addr del ADDRESS/LEN dev gm0"), std::string::npos) << v.next;
  EXPECT_NE(v.next.find("ip addr del 10.60.4.41/16 dev gm0 && ip addr add 10.60.4.41/16 dev gm0"), std::string::npos)
      << v.next;
}

TEST(DiagGidVerdicts, TableWithRoomFixesByReaddingTheAddress) {
  auto l = load("gid_missing");
  auto& port = l.inventory.kernel_devices.at(1).ports.at(0);
  ASSERT_EQ(l.inventory.kernel_devices.at(1).name, "rxeg");
  port.gids.resize(1000);
  const auto v = diagnose(l.target, l.inventory, l.attempt, SiblingNames{});
  EXPECT_EQ(v.cause.name(), "gid_missing");
  EXPECT_NE(v.summary.find("1000 of its 1024 GID entries are in use"), std::string::npos) << v.summary;
  EXPECT_EQ(v.fix, "ip addr del 10.60.4.41/16 dev gm0 && ip addr add 10.60.4.41/16 dev gm0");
}

// A table whose length libibverbs did not give: the re-add is the next step, not a fix.
TEST(DiagGidVerdicts, UnknownTableLengthMakesTheReaddANextStep) {
  auto l = load("gid_missing");
  for (auto& device : l.inventory.user_devices) {
    for (auto& port : device.ports) port.gid_table_len = 0;
  }
  const auto v = diagnose(l.target, l.inventory, l.attempt, SiblingNames{});
  EXPECT_EQ(v.cause.name(), "gid_missing");
  EXPECT_EQ(v.fix, "");
  EXPECT_NE(v.next.find("ibv_devinfo -v -d rxeg"), std::string::npos) << v.next;
}

// Deleting a subnet's first IPv4 address deletes the rest of the subnet: no fix then.
TEST(DiagGidVerdicts, ReaddingASubnetsPrimaryIsNoFix) {
  auto l = load("gid_missing");
  auto& port = l.inventory.kernel_devices.at(1).ports.at(0);
  std::erase_if(port.gids, [](const GidEntry& entry) { return entry.gid == "::ffff:10.60.0.2"; });
  l.target = make_target("10.60.0.2", 0, "tcp");
  const auto v = diagnose(l.target, l.inventory, l.attempt, SiblingNames{});
  EXPECT_EQ(v.cause.name(), "gid_missing");
  EXPECT_EQ(v.fix, "");
  EXPECT_NE(v.next.find("net.ipv4.conf.gm0.promote_secondaries=1"), std::string::npos) << v.next;
}

// The same bind with the GID there is not gid_missing.
TEST(DiagGidVerdicts, AnAddressWithItsGidIsNotMissing) {
  auto l = load("gid_missing");
  auto& port = l.inventory.kernel_devices.at(1).ports.at(0);
  port.gids.back().gid = "::ffff:10.60.4.41";
  EXPECT_NE(diagnose(l.target, l.inventory, l.attempt, SiblingNames{}).cause.name(), "gid_missing");
}

TEST(DiagSysfs, ReadsDevicePortsAndGids) {
  const auto l = load("ok");
  ASSERT_EQ(l.inventory.kernel_devices.size(), 1u);
  const auto& device = l.inventory.kernel_devices[0];
  EXPECT_EQ(device.name, "rxe0");
  EXPECT_EQ(device.driver, "rdma_rxe");
  EXPECT_EQ(device.parent_netdev, "rxenet0");
  EXPECT_EQ(device.uverbs, "uverbs0");
  EXPECT_EQ(device.index, 0);
  ASSERT_EQ(device.ports.size(), 1u);
  const auto& port = device.ports[0];
  EXPECT_EQ(port.state_code, 4);
  EXPECT_EQ(port.state, "ACTIVE");
  EXPECT_EQ(port.link_layer, "Ethernet");
  ASSERT_GE(port.gids.size(), 2u);
  EXPECT_EQ(port.gids[1].gid, "::ffff:10.55.0.1");
  EXPECT_EQ(port.gids[1].type, "RoCE v2");
  EXPECT_EQ(port.gids[1].netdev, "rxenet0");
}

// A LAG's RDMA device hangs on its first PF; the bond, its VLAN and bonding_masters (a plain
// file among the netdevs) have no bus device.
TEST(DiagSysfs, ReadsARoceLagOverABond) {
  const auto l = load("ok_roce_bond_vlan");
  ASSERT_EQ(l.inventory.kernel_devices.size(), 1u);
  const auto& device = l.inventory.kernel_devices[0];
  EXPECT_EQ(device.name, "mlx5_bond_0");
  EXPECT_EQ(device.driver, "mlx5_core");
  EXPECT_EQ(device.bus_device, "0000:3b:00.0");
  EXPECT_EQ(device.parent_netdev, "");
  EXPECT_EQ(device.index, 2);
  ASSERT_EQ(device.ports.size(), 1u);
  const auto& gids = device.ports[0].gids;
  ASSERT_EQ(gids.size(), 6u);  // the zero entries 6 and 7 are unused
  EXPECT_EQ(gids[0].netdev, "bond0");
  EXPECT_EQ(gids[0].type, "RoCE v1");
  EXPECT_EQ(gids[5].gid, "::ffff:10.70.0.11");
  EXPECT_EQ(gids[5].type, "RoCE v2");
  EXPECT_EQ(gids[5].netdev, "bond0.100");
  std::set<std::string> netdevs;
  for (const auto& netdev : l.inventory.netdevs) netdevs.insert(netdev.name);
  EXPECT_EQ(netdevs, (std::set<std::string>{"bond0", "bond0.100", "ens1f0np0", "ens1f1np1", "lo"}));
  const auto* vlan = netdev_owning(l.inventory, "10.70.0.11");
  ASSERT_NE(vlan, nullptr);
  EXPECT_EQ(vlan->name, "bond0.100");
  EXPECT_EQ(vlan->vlan, 100);
  EXPECT_EQ(vlan->mtu, 9000);
}

TEST(DiagGidVerdicts, TheSecondPortsAddressMapsToTheSecondDevice) {
  const auto v = diagnose_fixture("ok_dual_port");
  EXPECT_TRUE(mentions(v, "10.72.0.11 maps to mlx5_1 port 1 (netdev ens2f1np1), GID index 2 (RoCE v1), 3 (RoCE v2)"))
      << render_verdict(v);
  EXPECT_TRUE(mentions(v, "perftest: -d mlx5_1 -x 3")) << render_verdict(v);
  EXPECT_FALSE(mentions(v, "maps to mlx5_0")) << render_verdict(v);
}

// A port of a device that is DOWN (cxgb4_0 port 2, no cable) does not spoil a bind on its
// other port.
TEST(DiagGidVerdicts, AnotherPortDownIsNoCause) {
  const auto l = load("ok_iwarp_cxgb4");
  ASSERT_EQ(l.inventory.kernel_devices.at(0).ports.size(), 2u);
  EXPECT_EQ(l.inventory.kernel_devices[0].ports[1].state, "DOWN");
  EXPECT_EQ(diagnose(l.target, l.inventory, l.attempt, SiblingNames{}).cause.name(), "ok");
}

// iWARP: rdma_cm binds an address to the port whose GID holds its netdev's MAC (the GID is the
// MAC followed by zeros), as IPoIB's is its hardware address; the verdict should name that
// netdev and the entry, and call it iWARP, not RoCE v1.
TEST(DiagGidVerdicts, AnIwarpBindNamesItsNetdevAndEntry) {
  for (const char* name : {"ok_iwarp_irdma", "ok_iwarp_cxgb4"}) {
    SCOPED_TRACE(name);
    const auto l = load(name);
    EXPECT_EQ(l.inventory.kernel_devices.at(0).ports.at(0).gids.at(0).type, "iWARP");
  }
  const auto v = diagnose_fixture("ok_iwarp_irdma");
  EXPECT_TRUE(mentions(v, "10.73.0.11 maps to iwp24s0f0 port 1 (netdev ens801f0), GID index 0 (iWARP)"))
      << render_verdict(v);
  EXPECT_FALSE(mentions(v, "RoCE")) << render_verdict(v);
}

TEST(DiagSysfs, MissingTreeIsNotAnError) {
  Inventory inventory;
  read_sysfs("/nonexistent-sysfs-root", inventory);
  EXPECT_FALSE(inventory.rdma_core_present);
  EXPECT_TRUE(inventory.kernel_devices.empty());
}

// A facts.json that parses but does not fit: the message a usage error prints, or "" when
// load_replay accepted it.
class ReplayDir {
 public:
  ReplayDir() : dir_(fs::temp_directory_path() / ("rdmakit-replay-" + std::to_string(::getpid()))) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::create_directory_symlink(diag_fixtures / "ok" / "sys", dir_ / "sys");
  }
  ~ReplayDir() { fs::remove_all(dir_); }
  std::string load(const std::string& facts) const {
    std::ofstream(dir_ / "facts.json") << facts;
    try {
      load_replay(dir_);
    } catch (const UsageError& error) {
      return error.what();
    }
    return {};
  }
  const fs::path& path() const { return dir_; }

 private:
  fs::path dir_;
};

TEST(DiagReplay, WrongJsonTypesAreUsageErrorsNamingTheMember) {
  const ReplayDir dir;
  const struct {
    const char* facts;
    const char* says;
  } cases[] = {
      {R"([])", "the document is an array, not an object"},
      {R"("facts")", "the document is a string, not an object"},
      {R"(null)", "the document is null, not an object"},
      {R"({"address": 10})", "address: expected a string"},
      {R"({"address": ["10.55.0.1"]})", "address: expected a string"},
      {R"({"kernel_indices": [0]})", R"("kernel_indices" is an array, not an object)"},
      {R"({"kernel_indices": {"rxe0": "zero"}})", R"("kernel_indices": type must be number, but is string)"},
      {R"({"addresses": "10.55.0.1"})", R"("addresses" is a string, not an object)"},
      {R"({"addresses": {"rxenet0": "10.55.0.1/24"}})", R"("addresses": type must be array, but is string)"},
      {R"({"userspace_list_errno": "EPERM"})", "userspace_list_errno: expected an integer"},
      {R"({"user_devices": {"name": "rxe0"}})", "user_devices: expected an array"},
      {R"({"user_devices": [["rxe0"]]})", "user_devices[0]: expected an object"},
      {R"({"provider_drivers": "rxe"})", "provider_drivers: expected an array"},
      {R"({"rdma_cm": []})", "rdma_cm: expected an object"},
      {R"({"memlock": [65536]})", "memlock: expected an object"},
      {R"({"memlock": {"cap_ipc_lock": "yes"}})", "memlock.cap_ipc_lock: expected true or false"},
      {R"({"attempt": []})", "attempt: expected an object"},
      {R"({"attempt": {}})", "attempt.steps: missing"},
      {R"({"attempt": {"steps": [{"call": 5}]}})", "attempt.steps[0].call: expected a string"},
      {R"({"attempt": {"steps": [], "port": "7174"}})", "attempt.port: expected an integer"},
      {R"({"memlock": {"soft_bytes": 1.5}})", "/memlock/soft_bytes is 1.5, not an integer"},
      {R"({"kernel_indices": {"rxe0": 1e300}})", "/kernel_indices/rxe0 is 1e+300, not an integer"},
  };
  for (const auto& c : cases) {
    const auto message = dir.load(c.facts);
    EXPECT_EQ(message.rfind("--replay " + dir.path().string() + ": facts.json: ", 0), 0u) << c.facts << ": " << message;
    EXPECT_NE(message.find(c.says), std::string::npos) << c.facts << ": " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << c.facts << ": " << message;  // one line on stderr
  }
}

TEST(DiagReplay, UnreadableOrUnparsableFactsAreUsageErrors) {
  const ReplayDir dir;
  EXPECT_NE(dir.load("{\"address\": ").find("facts.json is not valid JSON"), std::string::npos);
  EXPECT_THROW(load_replay(dir.path() / "nowhere"), UsageError);
  // What fits still loads, the facts' address included.
  EXPECT_EQ(dir.load(R"({"address": "10.55.0.1", "kernel_indices": {"rxe0": 3}})"), "");
  const auto replay = load_replay(dir.path());
  EXPECT_EQ(replay.address, "10.55.0.1");
  ASSERT_EQ(replay.inventory.kernel_devices.size(), 1u);
  EXPECT_EQ(replay.inventory.kernel_devices[0].index, 3);
}

TEST(DiagTarget, ClassifiesAddresses) {
  EXPECT_TRUE(make_target("0.0.0.0", 0, "tcp").wildcard);
  EXPECT_TRUE(make_target("::", 0, "tcp").wildcard);
  EXPECT_TRUE(make_target("127.0.0.5", 0, "tcp").loopback);
  EXPECT_TRUE(make_target("::1", 0, "tcp").loopback);
  const auto v6 = make_target("fd55:0:0::1", 7174, "udp");
  EXPECT_EQ(v6.host, "fd55::1");
  EXPECT_EQ(v6.family, AF_INET6);
  EXPECT_EQ(v6.port_space, "udp");
  EXPECT_EQ(make_target("", 0, "tcp").family, 0);
  EXPECT_THROW(make_target("not-an-address", 0, "tcp"), UsageError);
  // A mapped address stays IPv6, as rdma_cm resolves it (and the kernel routes it).
  const auto mapped = make_target("::ffff:10.55.0.1", 0, "tcp");
  EXPECT_EQ(mapped.family, AF_INET6);
  EXPECT_EQ(mapped.host, "::ffff:10.55.0.1");
  EXPECT_FALSE(mapped.loopback);
  // inet_pton stops at a NUL; the whole text must be the address.
  EXPECT_THROW(make_target(std::string("10.55.0.1\0junk", 14), 0, "tcp"), UsageError);
}

TEST(DiagGid, TextForms) {
  EXPECT_EQ(gid_text("0000:0000:0000:0000:0000:ffff:0a37:0001"), "::ffff:10.55.0.1");
  EXPECT_EQ(gid_text("fe80:0000:0000:0000:2451:1eff:fe78:02bb"), "fe80::2451:1eff:fe78:2bb");
  EXPECT_EQ(gid_for_address("10.55.0.1"), "::ffff:10.55.0.1");
  EXPECT_EQ(gid_for_address("fd55:0::1"), "fd55::1");
}

TEST(DiagAssess, FlagsTheBrokenArea) {
  const auto l = load("provider_missing");
  bool providers_failed = false;
  for (const auto& check : assess(l.inventory)) {
    if (check.area == "providers") providers_failed = check.status == CheckStatus::fail;
  }
  EXPECT_TRUE(providers_failed);
}

TEST(DiagAssess, HealthyHostHasNoFailures) {
  for (const auto& check : assess(load("ok").inventory)) {
    EXPECT_NE(check.status, CheckStatus::fail) << check.area << ": " << check.text;
  }
}

TEST(DiagReport, DiagnosisResultIsDiagBindsReport) {
  const auto l = load("netdev_without_rdma");
  Diagnosis d{.target = l.target, .inventory = l.inventory, .attempt = l.attempt, .verdict = {}};
  d.verdict = diagnose(d.target, d.inventory, d.attempt, SiblingNames{});
  Report report;
  report.tool = "diag-bind";
  report.exit_code = d.verdict.exit_code;
  report.add(DiagnosisResult(d));
  const auto j = to_json(report);
  // The verdict's cause stands where every report says how the run ended.
  EXPECT_EQ(j["outcome"], "netdev_without_rdma");
  EXPECT_EQ(j["exit_code"], 1);
  for (const char* key : {"address", "checks", "inventory", "attempt", "verdict"}) {
    EXPECT_EQ(j[key], to_json(d)[key]) << key;
  }
  EXPECT_EQ(render_text(report), render_text(d.target, d.inventory, d.attempt, d.verdict));
}

TEST(DiagReport, JsonCarriesStableCauseAndSteps) {
  const auto l = load("netdev_without_rdma");
  const auto v = diagnose(l.target, l.inventory, l.attempt, SiblingNames{});
  const auto verdict = to_json(v);
  EXPECT_EQ(verdict["cause"], "netdev_without_rdma");
  EXPECT_EQ(verdict["exit_code"], 1);
  const auto attempt = to_json(l.attempt);
  bool saw_enodev = false;
  for (const auto& step : attempt["steps"]) {
    saw_enodev = saw_enodev || (step["call"] == "rdma_bind_addr" && step["errno_name"] == "ENODEV");
  }
  EXPECT_TRUE(saw_enodev);
  const auto text = render_text(l.target, l.inventory, l.attempt, v);
  EXPECT_NE(text.find("verdict: netdev_without_rdma (exit 1)"), std::string::npos) << text;
}

}  // namespace
}  // namespace rdmakit::diag
