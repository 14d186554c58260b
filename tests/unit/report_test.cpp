#include <gtest/gtest.h>

#include <cerrno>

#include "lib/core/report.hpp"

namespace rdmakit {
namespace {

Report sample() {
  Report r;
  r.tool = "rping";
  r.role = "client";
  r.arguments = {{"count", 3}};
  r.peer_address = "10.0.0.1:7174";
  r.add_timing("addr_resolve", 0.5);
  r.add_timing("route_resolve", 0.25);
  r.add_timing("connect", 1.5);
  r.iterations_requested = 3;
  r.iterations_completed = 3;
  r.bytes = 384;
  LatencyRecorder rec;
  rec.add(std::chrono::microseconds(10));
  r.rtt = rec.summary();
  return r;
}

TEST(ReportJson, HasStableShape) {
  const auto j = to_json(sample());
  EXPECT_EQ(j["schema_version"], report_schema_version);
  EXPECT_EQ(j["tool"], "rping");
  EXPECT_EQ(j["outcome"], "completed");
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_EQ(j["iterations"]["requested"], 3);
  EXPECT_EQ(j["iterations"]["completed"], 3);
  EXPECT_EQ(j["bytes"], 384);
  EXPECT_DOUBLE_EQ(j["cm_timings_ms"]["connect"].get<double>(), 1.5);
  for (const char* key : {"count", "min", "avg", "p50", "p99", "p99.9", "max"}) {
    EXPECT_TRUE(j["rtt_us"].contains(key)) << key;
  }
  EXPECT_TRUE(j["errors"].is_array());
  EXPECT_TRUE(j["errors"].empty());
  // Round-trips through text: what we print is valid JSON.
  EXPECT_EQ(nlohmann::json::parse(j.dump()), j);
}

TEST(ReportJson, ErrorCarriesCallErrnoAndHint) {
  Report r = sample();
  r.fail(record_of(RdmaError("rdma_bind_addr", "10.0.0.9:7174", ENODEV, "10.0.0.9")));
  const auto j = to_json(r);
  EXPECT_EQ(j["outcome"], "failed");
  EXPECT_EQ(j["exit_code"], 1);
  ASSERT_EQ(j["errors"].size(), 1u);
  EXPECT_EQ(j["errors"][0]["call"], "rdma_bind_addr");
  EXPECT_EQ(j["errors"][0]["errno"], ENODEV);
  EXPECT_EQ(j["errors"][0]["errno_name"], "ENODEV");
  EXPECT_NE(j["errors"][0]["hint"].get<std::string>().find("diag-bind 10.0.0.9"), std::string::npos);
}

TEST(ReportJson, ToolSectionsCannotOverwriteCommonKeys) {
  Report r = sample();
  r.extra["rows"] = nlohmann::json::array();
  EXPECT_NO_THROW(to_json(r));
  r.extra["outcome"] = "completed";  // would hide a failed run's outcome
  EXPECT_THROW(to_json(r), std::logic_error);
}

TEST(ReportJson, StoppedRunKeepsPartialCounts) {
  Report r = sample();
  r.iterations_completed = 2;
  r.stop(StopReason::peer_disconnected, "the peer disconnected");
  const auto j = to_json(r);
  EXPECT_EQ(j["outcome"], "peer_disconnected");
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_EQ(j["iterations"]["completed"], 2);
}

TEST(ReportJson, TextIsValidJsonWhateverBytesTheStringsHold) {
  Report r = sample();
  r.role = "cli\xc3\xa9nt";              // valid UTF-8: kept as it is
  r.peer_address = "10.0.0.1\xff:7174";  // a peer's bytes
  r.arguments["server"] = std::string("host\x80");
  r.fail(ErrorRecord{.message = "peer said \xc3\x28", .call = {}, .errnum = 0, .hint = {}, .completion = {}});
  r.extra["from\xfe"] = "key not UTF-8";
  const auto text = json_text(to_json(r));
  const auto parsed = nlohmann::json::parse(text, nullptr, false);
  ASSERT_FALSE(parsed.is_discarded()) << text;
  EXPECT_EQ(parsed["role"], "cli\xc3\xa9nt");
  EXPECT_EQ(parsed["peer_address"], "10.0.0.1\xef\xbf\xbd:7174");
  EXPECT_EQ(parsed["arguments"]["server"], "host\xef\xbf\xbd");
  EXPECT_EQ(parsed["errors"][0]["message"], "peer said \xef\xbf\xbd(");
  EXPECT_EQ(parsed["from\xef\xbf\xbd"], "key not UTF-8");
  EXPECT_EQ(parsed["tool"], "rping");
  EXPECT_EQ(parsed["iterations"]["completed"], 3);
}

TEST(ReportJson, TextIsIndentedAndRoundTrips) {
  const auto j = to_json(sample());
  const auto text = json_text(j);
  EXPECT_EQ(text.rfind("{\n  \"", 0), 0u) << text;
  EXPECT_EQ(nlohmann::json::parse(text), j);
}

TEST(ReportJson, NoSamplesMeansNullRtt) {
  Report r;
  r.tool = "rping";
  EXPECT_TRUE(to_json(r)["rtt_us"].is_null());
}

TEST(ReportText, SummarisesRun) {
  const auto text = render_text(sample());
  EXPECT_NE(text.find("3 of 3 iterations"), std::string::npos);
  EXPECT_NE(text.find("connect 1.500 ms"), std::string::npos);
  EXPECT_NE(text.find("p99.9"), std::string::npos);
}

}  // namespace
}  // namespace rdmakit
