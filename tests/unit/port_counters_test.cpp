// The port counters send_bw --counters reads, from a sysfs-like tree made here.

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/unit/file_tree.hpp"

#include "lib/send_bw/port_counters.hpp"

namespace rdmakit {
namespace {

namespace fs = std::filesystem;
using fixture::fresh_tree;
using fixture::write_file;

TEST(PortCounters, ReadsBothFoldersAndSkipsWhatIsNoNumber) {
  const auto root = fresh_tree("port_counters_sysfs");
  const auto port = root / "rxe0" / "ports" / "1";
  write_file(port / "hw_counters" / "sent_pkts", "1200\n");
  write_file(port / "hw_counters" / "retry_exceeded_err", "0\n");
  write_file(port / "hw_counters" / "lifespan", "10\n");  // a setting, not a counter
  write_file(port / "hw_counters" / "link_state", "not a number\n");
  write_file(port / "counters" / "port_xmit_data", "77\n");
  write_file(port / "counters" / "sent_pkts", "5\n");  // the hw_counters one wins
  const auto counters = read_port_counters("rxe0", 1, root);
  EXPECT_EQ(counters, (PortCounters{{"port_xmit_data", 77}, {"retry_exceeded_err", 0}, {"sent_pkts", 1200}}));
  EXPECT_EQ(counters_lifespan("rxe0", 1, root), std::chrono::milliseconds(10));
  EXPECT_EQ(counters_lifespan("rxe0", 2, root), std::chrono::milliseconds(0));
  EXPECT_TRUE(read_port_counters("rxe0", 2, root).empty());
  EXPECT_TRUE(read_port_counters("mlx5_0", 1, root).empty());
  fs::remove_all(root);
}

TEST(PortCounters, DeltasCoverTheCountersSeenBothTimes) {
  const PortCounters before{{"sent_pkts", 100}, {"rcvd_pkts", 50}, {"gone", 1}};
  const PortCounters after{{"sent_pkts", 160}, {"rcvd_pkts", 40}, {"new", 3}};
  EXPECT_EQ(counter_deltas(before, after), (CounterDeltas{{"rcvd_pkts", -10}, {"sent_pkts", 60}}));
  // The IB data counters count 4-byte words: their bytes come beside them.
  const PortCounters ib_before{{"port_xmit_data", 1000}, {"port_rcv_data", 10}};
  const PortCounters ib_after{{"port_xmit_data", 2024}, {"port_rcv_data", 11}};
  EXPECT_EQ(counter_deltas(ib_before, ib_after),
            (CounterDeltas{
                {"port_rcv_bytes", 4}, {"port_rcv_data", 1}, {"port_xmit_bytes", 4096}, {"port_xmit_data", 1024}}));
}

}  // namespace
}  // namespace rdmakit
