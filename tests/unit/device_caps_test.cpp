#include "lib/rdma/device_caps.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "lib/rdma/completion_clock.hpp"
#include "lib/send_bw/lane.hpp"
#include "lib/send_bw/loops.hpp"

namespace rdmakit {
namespace {

// The numbers the providers report (rdma-core's providers and the kernel's drivers):
// cxgb4 8 reads each way, mlx5 16, rxe 128; irdma 48 inline bytes on some cards.
DeviceCaps caps_of(const char* device, Transport transport, std::uint32_t reads) {
  return DeviceCaps{.device = device,
                    .port = 1,
                    .transport = transport,
                    .kernel_sees_traffic = false,
                    .max_reads_in = reads,
                    .max_reads_out = reads,
                    .atomics = transport != Transport::iwarp};
}

TEST(DeviceCaps, ReadDepthFitsTheDeviceAndTheCm) {
  EXPECT_EQ(fitted_read_depth(16, 8), 8);     // cxgb4
  EXPECT_EQ(fitted_read_depth(16, 16), 16);   // mlx5
  EXPECT_EQ(fitted_read_depth(16, 128), 16);  // rxe: what the tool keeps
  EXPECT_EQ(fitted_read_depth(1000, 4096), 255);
  EXPECT_EQ(fitted_read_depth(1, 0), 0);  // a device that takes no READs is offered none
}

TEST(DeviceCaps, IwarpHasNoDatagramsImmediateDataOrMulticast) {
  const auto cxgb4 = caps_of("cxgb4_0", Transport::iwarp, 8);
  EXPECT_FALSE(has_datagrams(cxgb4));
  EXPECT_FALSE(has_immediate_data(cxgb4));
  EXPECT_TRUE(read_sink_needs_remote_write(cxgb4));
  EXPECT_EQ(missing_for(cxgb4, Need::datagrams),
            "cxgb4_0 is iWARP: it has no unreliable datagrams (UD), which need RoCE or InfiniBand");
  EXPECT_EQ(missing_for(cxgb4, Need::multicast),
            "cxgb4_0 is iWARP: it has no multicast, which needs RoCE or InfiniBand");
}

TEST(DeviceCaps, RoceAndInfinibandHaveWhatTheToolsNeed) {
  for (const auto transport : {Transport::roce, Transport::infiniband}) {
    const auto caps = caps_of("mlx5_0", transport, 16);
    EXPECT_TRUE(has_datagrams(caps));
    EXPECT_TRUE(has_immediate_data(caps));
    EXPECT_FALSE(read_sink_needs_remote_write(caps));
    EXPECT_FALSE(missing_for(caps, Need::datagrams));
    EXPECT_FALSE(missing_for(caps, Need::multicast));
  }
  // EFA: UD, but neither immediate data over it nor multicast.
  const auto efa = caps_of("efa_0", Transport::unspecified, 0);
  EXPECT_TRUE(has_datagrams(efa));
  EXPECT_FALSE(has_immediate_data(efa));
  EXPECT_TRUE(missing_for(efa, Need::multicast));
}

TEST(DeviceCaps, InlineSizesStepDownToWhatProvidersGrant) {
  EXPECT_EQ(inline_sizes_to_try(64), (std::vector<std::uint32_t>{64, 48, 32, 16, 0}));
  EXPECT_EQ(inline_sizes_to_try(100), (std::vector<std::uint32_t>{100, 64, 48, 32, 16, 0}));
  EXPECT_EQ(inline_sizes_to_try(1024), (std::vector<std::uint32_t>{1024, 512, 256, 220, 128, 64, 48, 32, 16, 0}));
  EXPECT_EQ(inline_sizes_to_try(0), (std::vector<std::uint32_t>{0}));
}

// A device whose completion counter is 32 bits wide wraps every 4.3 s at 1 GHz: a round trip
// across the wrap is still the short one.
TEST(DeviceCaps, ThirtyTwoBitTimestampsAcrossAWrap) {
  const auto clock = CompletionClock::of_device(0xffffffffULL, 1'000'000);
  ASSERT_TRUE(clock);
  EXPECT_EQ(clock->ns_between(0xfffffff0ULL, 0x10ULL), 0x20U);
  // Bits above the mask (a provider that leaves them set) do not count.
  EXPECT_EQ(clock->ns_between(0x1'00000005ULL, 0x2'00000009ULL), 4U);
}

// A responder that keeps its atomics big-endian hands a little-endian host each value
// byte-swapped: the first value that tells sets the order, and the run must keep to it.
TEST(AtomicCounters, ABigEndianResponderIsLearntFromTheFirstValueThatTells) {
  auto order = AtomicByteOrder::unknown;
  EXPECT_TRUE(matches_counter(0, 0, order));  // 0 reads the same both ways
  EXPECT_EQ(order, AtomicByteOrder::unknown);
  EXPECT_TRUE(matches_counter(0x0100000000000000ULL, 1, order));
  EXPECT_EQ(order, AtomicByteOrder::swapped);
  EXPECT_TRUE(matches_counter(0x0200000000000000ULL, 2, order));
  EXPECT_FALSE(matches_counter(3, 3, order)) << "back in host order: the counter is not what it was";
  EXPECT_FALSE(matches_counter(0x0400000000000000ULL, 5, order));

  auto host = AtomicByteOrder::unknown;
  EXPECT_TRUE(matches_counter(1000, 1000, host));
  EXPECT_EQ(host, AtomicByteOrder::host);
  EXPECT_FALSE(matches_counter(__builtin_bswap64(1001ULL), 1001, host));
  EXPECT_FALSE(matches_counter(999, 1000, host)) << "a lost add";
}

// The client's credits: the server's total grows modulo 2^32, and a message read late (an
// older, smaller total) grants nothing.
TEST(SendCredits, GrantsWhatTheTotalAddsAcrossItsWrap) {
  SendCredits credits;
  EXPECT_EQ(credits.allowed(), bw::stream_credits);
  credits.sent = bw::stream_credits;
  EXPECT_EQ(credits.allowed(), 0U);
  credits.grant(64);
  EXPECT_EQ(credits.allowed(), 64U);
  credits.grant(32);  // late
  EXPECT_EQ(credits.allowed(), 64U);
  credits.reported = 0xffffffc0U;
  credits.grant(0x40);  // 128 more, across the wrap
  EXPECT_EQ(credits.allowed(), 64U + 128U);
}

}  // namespace
}  // namespace rdmakit
