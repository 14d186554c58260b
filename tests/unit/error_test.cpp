#include <gtest/gtest.h>

#include <cerrno>

#include "lib/core/error.hpp"

namespace rdmakit {
namespace {

TEST(RdmaError, NamesCallSubjectAndErrno) {
  const RdmaError e("rdma_bind_addr", "10.0.0.9:7174", ENODEV);
  EXPECT_STREQ(e.what(), "rdma_bind_addr(10.0.0.9:7174): No such device");
  EXPECT_EQ(e.errnum(), ENODEV);
  EXPECT_EQ(e.hint(), "no RDMA device serves 10.0.0.9; run 'diag-bind 10.0.0.9' (or add --diagnose) to see why");
}

TEST(RdmaError, AddressNotAvailablePointsAtDiagBindToo) {
  const RdmaError e("rdma_resolve_addr", "[fd00::9]:7174", EADDRNOTAVAIL);
  EXPECT_NE(e.hint().find("diag-bind fd00::9"), std::string::npos);
}

TEST(RdmaError, NoHintWhereNothingUseful) {
  EXPECT_EQ(RdmaError("ibv_post_send", "", EINVAL).hint(), "");
}

TEST(AddressOf, StripsPorts) {
  EXPECT_EQ(address_of("10.0.0.1:7174"), "10.0.0.1");
  EXPECT_EQ(address_of("[fe80::1]:7174"), "fe80::1");
  EXPECT_EQ(address_of("fe80::1"), "fe80::1");
  EXPECT_EQ(address_of(""), "");
}

}  // namespace
}  // namespace rdmakit
