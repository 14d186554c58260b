#include "lib/rdma/work_id.hpp"

#include <gtest/gtest.h>

namespace rdmakit {
namespace {

TEST(WorkId, EncodesKindOwnerAndSequence) {
  const WorkId id{.kind = WorkKind::receive, .owner = 3, .sequence = 7};
  EXPECT_EQ(id.encode(), (std::uint64_t{2} << 56) | (std::uint64_t{3} << 32) | 7);
  EXPECT_EQ(WorkId::decode(id.encode()), id);
}

TEST(WorkId, RoundTripsTheWholeRange) {
  const WorkId id{.kind = WorkKind::rdma_write, .owner = WorkId::owner_mask, .sequence = 0xffffffffu};
  EXPECT_EQ(WorkId::decode(id.encode()), id);
  EXPECT_EQ(WorkId::decode(0), WorkId{});
}

TEST(WorkId, OwnerKeepsItsLow24Bits) {
  const WorkId id{.kind = WorkKind::send, .owner = 0x1000005, .sequence = 1};
  EXPECT_EQ(WorkId::decode(id.encode()).owner, 5u);
  EXPECT_EQ(WorkId::decode(id.encode()).kind, WorkKind::send);
}

TEST(WorkId, UnwrapRestoresTheFullNumber) {
  EXPECT_EQ(WorkId::unwrap(5, 0), 5u);
  EXPECT_EQ(WorkId::unwrap(64, 32), 64u);
  EXPECT_EQ(WorkId::unwrap(3, 0xfffffff0u), 0x100000003u);  // past 2^32
  EXPECT_EQ(WorkId::unwrap(0x10, 0x2fffffff0u), 0x300000010u);
  EXPECT_EQ(WorkId::unwrap(7, 7), 7u);
}

TEST(WorkId, KindNames) {
  EXPECT_STREQ(work_kind_name(WorkKind::send), "SEND");
  EXPECT_STREQ(work_kind_name(WorkKind::receive), "RECV");
  EXPECT_STREQ(work_kind_name(WorkKind::rdma_read), "RDMA_READ");
  EXPECT_STREQ(work_kind_name(WorkKind::rdma_write), "RDMA_WRITE");
  EXPECT_STREQ(work_kind_name(WorkKind::unknown), "work request");
  EXPECT_STREQ(work_kind_name(WorkId::decode(std::uint64_t{9} << 56).kind), "work request");
}

}  // namespace
}  // namespace rdmakit
