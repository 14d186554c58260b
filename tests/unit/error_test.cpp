#include <gtest/gtest.h>

#include <cerrno>

#include "lib/base/error.hpp"
#include "lib/base/report.hpp"

namespace rdmakit {
namespace {

TEST(RdmaError, NamesCallSubjectAndErrno) {
  const RdmaError e("rdma_bind_addr", "10.0.0.9:7174", ENODEV, "10.0.0.9");
  EXPECT_STREQ(e.what(), "rdma_bind_addr(10.0.0.9:7174): No such device");
  EXPECT_EQ(e.errnum(), ENODEV);
  EXPECT_EQ(e.address(), "10.0.0.9");
  EXPECT_EQ(e.hint(SiblingNames{}),
            "no RDMA device serves 10.0.0.9; run 'diag-bind 10.0.0.9' (or add --diagnose) to see why");
}

TEST(RdmaError, HintNamesTheAddressFieldNotTheSubjectText) {
  // The subject is free text; only the address field says which host the call was about.
  const RdmaError e("rdma_resolve_addr", "[fd00::9]:7174 (second try)", EADDRNOTAVAIL, "fd00::9");
  EXPECT_NE(e.hint(SiblingNames{}).find("diag-bind fd00::9'"), std::string::npos) << e.hint(SiblingNames{});
}

TEST(RdmaError, ConnectFailuresPointAtDiagConnectWithTheFailingPort) {
  const RdmaError timed_out("rdma_connect", "10.0.0.9:7174", ETIMEDOUT, "10.0.0.9");
  EXPECT_NE(timed_out.hint(SiblingNames{}).find("run 'diag-connect 10.0.0.9 -p 7174'"), std::string::npos)
      << timed_out.hint(SiblingNames{});
  const RdmaError refused("rdma_connect", "[fd00::9]:18515", ECONNREFUSED, "fd00::9");
  EXPECT_NE(refused.hint(SiblingNames{}).find("run 'diag-connect fd00::9 -p 18515'"), std::string::npos)
      << refused.hint(SiblingNames{});
  // No port in the subject: the address alone.
  const RdmaError unreachable("rdma_resolve_addr", "the server", EHOSTUNREACH, "10.0.0.9");
  EXPECT_NE(unreachable.hint(SiblingNames{}).find("run 'diag-connect 10.0.0.9'"), std::string::npos)
      << unreachable.hint(SiblingNames{});
  // The subject may go on after the port; a bracketed IPv6 address has one too.
  const RdmaError worded("rdma_connect", "10.0.0.9:7174: the peer is unreachable", ETIMEDOUT, "10.0.0.9");
  EXPECT_NE(worded.hint(SiblingNames{}).find("run 'diag-connect 10.0.0.9 -p 7174'"), std::string::npos)
      << worded.hint(SiblingNames{});
  EXPECT_EQ(port_in_subject("[fd00::9]:18515 (second try)"), 18515);
  EXPECT_EQ(port_in_subject("fd00::9"), 0);
  EXPECT_EQ(port_in_subject("10.0.0.9:99999"), 0);
  EXPECT_EQ(port_in_subject("10.0.0.9:"), 0);
  EXPECT_EQ(port_in_subject("connection 3: 10.0.0.9:7174"), 0);
  // A multicast group is no peer to probe.
  const RdmaError group("rdma_resolve_addr", "239.255.1.2", ENETUNREACH, "239.255.1.2");
  EXPECT_EQ(group.hint(SiblingNames{}).find("diag-connect"), std::string::npos) << group.hint(SiblingNames{});
  EXPECT_FALSE(explained_by_diag_connect(group));
  // A local failure names no peer.
  EXPECT_EQ(RdmaError("rdma_connect", "10.0.0.9:7174", ETIMEDOUT).hint(SiblingNames{}).find("diag-connect"),
            std::string::npos);
}

TEST(RdmaError, NoHintWhereNothingUseful) {
  EXPECT_EQ(RdmaError("ibv_post_send", "", EINVAL).hint(SiblingNames{}), "");
}

TEST(RdmaError, WithoutErrnoSaysWhatCameInstead) {
  const auto e = RdmaError::without_errno("ibv_poll_cq", "connection 3", "returned -2");
  EXPECT_STREQ(e.what(), "ibv_poll_cq(connection 3): returned -2");
  EXPECT_EQ(e.errnum(), 0);
  const auto record = record_of(e, SiblingNames{});
  EXPECT_EQ(record.call, "ibv_poll_cq");
  EXPECT_FALSE(to_json(record).contains("errno"));
}

TEST(Checkers, ErrnoConventionReadsErrno) {
  errno = EADDRINUSE;
  try {
    check_errno(-1, "rdma_bind_addr", "10.0.0.1:7174", "10.0.0.1");
    FAIL() << "no throw";
  } catch (const RdmaError& e) {
    EXPECT_EQ(e.errnum(), EADDRINUSE);
    EXPECT_EQ(e.address(), "10.0.0.1");
  }
  errno = 0;
  try {
    check_errno(-1, "rdma_listen", "");
    FAIL() << "no throw";
  } catch (const RdmaError& e) {
    EXPECT_EQ(e.errnum(), 0);  // not invented
    EXPECT_STREQ(e.what(), "rdma_listen: returned -1 without errno");
  }
  EXPECT_NO_THROW(check_errno(0, "rdma_listen", ""));
}

TEST(Checkers, ReturnedConventionIgnoresErrno) {
  errno = EPERM;
  try {
    check_returned(ENOMEM, "ibv_post_send", "");
    FAIL() << "no throw";
  } catch (const RdmaError& e) {
    EXPECT_EQ(e.errnum(), ENOMEM);
  }
  try {
    check_returned(-EAGAIN, "ibv_req_notify_cq", "");  // providers that return -errno
    FAIL() << "no throw";
  } catch (const RdmaError& e) {
    EXPECT_EQ(e.errnum(), EAGAIN);
  }
  EXPECT_NO_THROW(check_returned(0, "ibv_req_notify_cq", ""));
}

TEST(Checkers, PointerConventionReadsErrnoOnNull) {
  int object = 0;
  EXPECT_EQ(check_pointer(&object, "ibv_alloc_pd", ""), &object);
  errno = ENOMEM;
  try {
    check_pointer(static_cast<int*>(nullptr), "ibv_reg_mr", "4096 bytes");
    FAIL() << "no throw";
  } catch (const RdmaError& e) {
    EXPECT_EQ(e.errnum(), ENOMEM);
    EXPECT_EQ(e.call(), "ibv_reg_mr");
  }
}

TEST(CompletionError, StatusReachesTheErrorRecord) {
  const CompletionError e("send completion failed: remote access error",
                          CompletionStatus{.status = 10, .text = "remote access error", .vendor_error = 0x88});
  const auto json = to_json(record_of(e));
  EXPECT_EQ(json["completion"]["status"], 10);
  EXPECT_EQ(json["completion"]["status_text"], "remote access error");
  EXPECT_EQ(json["completion"]["vendor_error"], 0x88);
}

}  // namespace
}  // namespace rdmakit
