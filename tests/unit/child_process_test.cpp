// The sibling tools run as child processes (rdma_smoke's cases, a tool's --diagnose), and the
// exchange by which a tool's --diagnose asks diag-bind for a diagnosis; no device needed.

#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <string>
#include <vector>

#include "lib/base/child_process.hpp"
#include "lib/base/error.hpp"
#include "lib/tool/attached_diagnosis.hpp"

namespace rdmakit {
namespace {

TEST(ChildProcess, CollectsOutputAndTheExitCode) {
  ChildProcess child({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(child.started());
  const auto outcome = child.finish(Clock::now() + std::chrono::seconds(20), -1);
  EXPECT_EQ(outcome.exit_code, 3);
  EXPECT_EQ(outcome.out, "out\n");
  EXPECT_EQ(outcome.err, "err\n");
  EXPECT_FALSE(outcome.timed_out);
}

TEST(ChildProcess, EndsWhatOutlivesItsDeadline) {
  ChildProcess child({"/bin/sh", "-c", "echo started; exec sleep 30"});
  const auto outcome = child.finish(Clock::now() + std::chrono::milliseconds(300), -1);
  EXPECT_TRUE(outcome.timed_out);
  EXPECT_EQ(outcome.signal, SIGTERM);
  EXPECT_EQ(outcome.out, "started\n");
  EXPECT_LT(outcome.seconds, 10);
}

TEST(ChildProcess, AProgramThatIsNotThereIsAnOutcomeNotAnException) {
  ChildProcess child({"/nonexistent/rping"});
  EXPECT_FALSE(child.started());
  const auto outcome = child.finish(Clock::now() + std::chrono::seconds(1), -1);
  EXPECT_NE(outcome.start_error.find("/nonexistent/rping"), std::string::npos);
}

// What a tool passes on reaches diag-bind whole: the failed call, its subject, its errno, the
// address, the timeout and the port space, empty fields included.
TEST(AttachedDiagnosis, TheRequestCarriesTheFailureWhole) {
  const RdmaError failure("rdma_resolve_addr", "10.0.0.9:7174", ETIMEDOUT, "10.0.0.9");
  std::vector<std::string> words{"diag-bind"};
  for (auto& word : attached_diagnosis_arguments(
           {.error = failure, .timeout = std::chrono::milliseconds(2500), .port_space = "udp"})) {
    words.push_back(word);
  }
  std::vector<const char*> argv;
  for (const auto& word : words) argv.push_back(word.c_str());
  const auto request = attached_diagnosis_request(static_cast<int>(argv.size()), argv.data());
  ASSERT_TRUE(request.has_value());
  EXPECT_EQ(request->error.call(), "rdma_resolve_addr");
  EXPECT_EQ(request->error.subject(), "10.0.0.9:7174");
  EXPECT_EQ(request->error.errnum(), ETIMEDOUT);
  EXPECT_EQ(request->error.address(), "10.0.0.9");
  EXPECT_EQ(request->timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(request->port_space, "udp");
  EXPECT_EQ(explained_by_diag_connect(request->error), explained_by_diag_connect(failure));

  const RdmaError no_address("rdma_create_event_channel", "", ENODEV);
  words = {"diag-bind"};
  for (auto& word : attached_diagnosis_arguments({.error = no_address, .timeout = std::chrono::milliseconds(5000)})) {
    words.push_back(word);
  }
  argv.clear();
  for (const auto& word : words) argv.push_back(word.c_str());
  const auto bare = attached_diagnosis_request(static_cast<int>(argv.size()), argv.data());
  ASSERT_TRUE(bare.has_value());
  EXPECT_EQ(bare->error.address(), "");
  EXPECT_EQ(bare->error.errnum(), ENODEV);
  EXPECT_EQ(bare->port_space, "tcp");
}

TEST(AttachedDiagnosis, OnlyTheFlagAsksAndAMalformedRequestIsAUsageError) {
  const char* plain[] = {"diag-bind", "10.0.0.1"};
  EXPECT_FALSE(attached_diagnosis_request(2, plain).has_value());
  const char* alone[] = {"diag-bind"};
  EXPECT_FALSE(attached_diagnosis_request(1, alone).has_value());
  const char* short_request[] = {"diag-bind", attached_diagnosis_flag, "rdma_bind_addr"};
  EXPECT_THROW(attached_diagnosis_request(3, short_request), UsageError);
  const char* bad_errno[] = {"diag-bind", attached_diagnosis_flag, "rdma_bind_addr", "", "19x", "", "5000"};
  EXPECT_THROW(attached_diagnosis_request(7, bad_errno), UsageError);
  const char* negative[] = {"diag-bind", attached_diagnosis_flag, "rdma_bind_addr", "", "19", "", "-1"};
  EXPECT_THROW(attached_diagnosis_request(7, negative), UsageError);
  // Without a port space the request is tcp's (what a tool of the same version before sent);
  // one that rdma_cm has no diagnosis for is refused.
  const char* tcp[] = {"diag-bind", attached_diagnosis_flag, "rdma_connect", "10.0.0.9:7174", "110", "10.0.0.9", "100"};
  EXPECT_EQ(attached_diagnosis_request(7, tcp)->port_space, "tcp");
  const char* ib[] = {"diag-bind", attached_diagnosis_flag, "rdma_connect", "10.0.0.9:7174", "110", "10.0.0.9", "100",
                      "ib"};
  EXPECT_THROW(attached_diagnosis_request(8, ib), UsageError);
}

TEST(AttachedDiagnosis, TheAnswerReadsBackAsWritten) {
  const AttachedDiagnosisAnswer sent{.diagnosis = {{"verdict", {{"cause", "no_rdma_device"}}}},
                                     .text = "verdict: no_rdma_device (exit 1)\n"};
  const auto read = read_attached_diagnosis_answer(attached_diagnosis_answer(sent));
  EXPECT_EQ(read.diagnosis, sent.diagnosis);
  EXPECT_EQ(read.text, sent.text);
}

TEST(AttachedDiagnosis, AnythingElseIsRefused) {
  const std::vector<std::string> outputs{"",
                                         "not json",
                                         "[]",
                                         R"({"diagnosis": {}})",
                                         R"({"diagnosis": [], "text": ""})",
                                         R"({"diagnosis": {}, "text": 3})",
                                         std::string(100, '[') + std::string(100, ']')};
  for (const auto& output : outputs) {
    EXPECT_THROW(read_attached_diagnosis_answer(output), ProtocolError) << output;
  }
}

}  // namespace
}  // namespace rdmakit
