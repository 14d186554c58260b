// send_bw --pin-core's reading of NUMA placement, from a sysfs-like tree made here.

#include <gtest/gtest.h>
#include <sched.h>

#include <filesystem>

#include "tests/unit/file_tree.hpp"

#include "lib/base/error.hpp"
#include "lib/send_bw/placement.hpp"

namespace rdmakit {
namespace {

namespace fs = std::filesystem;
using fixture::fresh_tree;
using fixture::write_file;

TEST(Placement, ParsesCpulists) {
  EXPECT_EQ(parse_cpulist("0-3,8,10-11"), (std::set<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpulist("5"), (std::set<int>{5}));
  EXPECT_EQ(parse_cpulist(""), (std::set<int>{}));  // a node without cores
  EXPECT_FALSE(parse_cpulist("3-1"));
  EXPECT_FALSE(parse_cpulist("a"));
  EXPECT_FALSE(parse_cpulist("1,,2"));
  EXPECT_FALSE(parse_cpulist("-1"));
  EXPECT_FALSE(parse_cpulist("0-99999999"));
}

TEST(Placement, ReadsTheNodesOfDevicesAndCores) {
  const auto root = fresh_tree("placement_sysfs");
  write_file(root / "class/infiniband/mlx5_0/device/numa_node", "1\n");
  write_file(root / "class/infiniband/mlx5_1/device/numa_node", "-1\n");  // no NUMA
  fs::create_directories(root / "class/infiniband/rxe0");                 // no PCI function at all
  write_file(root / "devices/system/node/node0/cpulist", "0-7,16-23\n");
  write_file(root / "devices/system/node/node1/cpulist", "8-15,24-31\n");
  write_file(root / "devices/system/node/possible", "0-1\n");  // not a node folder
  EXPECT_EQ(device_numa_node("mlx5_0", root), 1);
  EXPECT_EQ(device_numa_node("mlx5_1", root), std::nullopt);
  EXPECT_EQ(device_numa_node("rxe0", root), std::nullopt);
  EXPECT_EQ(device_numa_node("absent", root), std::nullopt);
  EXPECT_EQ(core_numa_node(17, root), 0);
  EXPECT_EQ(core_numa_node(9, root), 1);
  EXPECT_EQ(core_numa_node(64, root), std::nullopt);
  EXPECT_EQ(core_numa_node(0, root / "nowhere"), std::nullopt);
  fs::remove_all(root);
}

TEST(Placement, ReportsNullForWhatIsUnknown) {
  const Placement placed{.core = 3, .core_node = 0, .device_node = std::nullopt, .memory_on_device_node = false};
  EXPECT_EQ(placed.to_json(), nlohmann::json::parse(R"({"core": 3, "core_numa_node": 0, "device_numa_node": null,
                                                       "memory_on_device_node": false})"));
}

TEST(Placement, RefusesACoreThisProcessMayNotUse) {
  EXPECT_THROW(check_core_allowed(CPU_SETSIZE - 1), UsageError);
}

}  // namespace
}  // namespace rdmakit
