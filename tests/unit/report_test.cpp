#include <gtest/gtest.h>

#include <cerrno>
#include <optional>
#include <string>
#include <utility>

#include "lib/base/report.hpp"
#include "lib/tool/persistent.hpp"

namespace rdmakit {
namespace {

Report sample() {
  Report r;
  r.tool = "rping";
  r.role = "client";
  r.arguments = {{"count", 3}};
  r.peer_address = "10.0.0.1:7174";
  r.add_timing(Step::resolve_addr, 0.5);
  r.add_timing(Step::resolve_route, 0.25);
  r.add_timing(Step::connect, 1.5);
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
  EXPECT_TRUE(j["timings_ms"].empty());
  for (const char* key : {"count", "min", "avg", "p50", "p99", "p99.9", "max"}) {
    EXPECT_TRUE(j["rtt_us"].contains(key)) << key;
  }
  EXPECT_TRUE(j["errors"].is_array());
  EXPECT_TRUE(j["errors"].empty());
  // Round-trips through text: what we print is valid JSON.
  EXPECT_EQ(nlohmann::json::parse(j.dump()), j);
}

TEST(ReportJson, CmStepsApartFromTheOthers) {
  Report r = sample();
  r.add_timing(Step::reg_msgs, 0.125);
  r.add_timing(Step::transfer, 2.0);
  r.add_timing(Step::disconnect, 0.75);
  const auto j = to_json(r);
  EXPECT_EQ(j["cm_timings_ms"],
            (nlohmann::json{{"resolve_addr", 0.5}, {"resolve_route", 0.25}, {"connect", 1.5}, {"disconnect", 0.75}}));
  EXPECT_EQ(j["timings_ms"], (nlohmann::json{{"reg_msgs", 0.125}, {"transfer", 2.0}}));
  const auto text = render_text(r);
  EXPECT_NE(text.find("  cm: resolve_addr 0.500 ms resolve_route 0.250 ms connect 1.500 ms disconnect 0.750 ms\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  steps: reg_msgs 0.125 ms transfer 2.000 ms\n"), std::string::npos) << text;
}

TEST(Steps, OneSpellingEachAndTheCmStepsFirst) {
  std::size_t cm = 0;
  for (int i = 0; i <= static_cast<int>(Step::transfer); ++i) {
    const auto step = static_cast<Step>(i);
    EXPECT_EQ(step_named(step_name(step)), step) << step_name(step);
    EXPECT_EQ(nlohmann::json(step), step_name(step));
    cm += is_cm_step(step) ? 1 : 0;
  }
  EXPECT_EQ(cm, 13u);
  EXPECT_TRUE(is_cm_step(Step::resolve_addr));
  EXPECT_FALSE(is_cm_step(Step::reg_msgs));
  EXPECT_EQ(step_named("addr_resolve"), std::nullopt);  // the spelling before schema_version 4
  EXPECT_EQ(step_named("exchanges"), std::nullopt);
}

TEST(Steps, ATimerRunsItsStepsBackToBack) {
  StepTimer timer(Step::getaddrinfo);
  const auto first = timer.next(Step::create_ep);
  EXPECT_EQ(first.step, Step::getaddrinfo);
  EXPECT_EQ(timer.step(), Step::create_ep);
  EXPECT_EQ(timer.started(), first.ended);  // no gap between two steps
  const auto second = timer.span(true);
  EXPECT_EQ(second.step, Step::create_ep);
  EXPECT_TRUE(second.failed);
  EXPECT_GE(second.ms(), 0.0);
}

TEST(ReportJson, ErrorCarriesCallErrnoAndHint) {
  Report r = sample();
  r.fail(record_of(RdmaError("rdma_bind_addr", "10.0.0.9:7174", ENODEV, "10.0.0.9"), SiblingNames{}));
  const auto j = to_json(r);
  EXPECT_EQ(j["outcome"], "failed");
  EXPECT_EQ(j["exit_code"], 1);
  ASSERT_EQ(j["errors"].size(), 1u);
  EXPECT_EQ(j["errors"][0]["call"], "rdma_bind_addr");
  EXPECT_EQ(j["errors"][0]["errno"], ENODEV);
  EXPECT_EQ(j["errors"][0]["errno_name"], "ENODEV");
  EXPECT_NE(j["errors"][0]["hint"].get<std::string>().find("diag-bind 10.0.0.9"), std::string::npos);
}

// A tool's result of the kind each tool has: a few keys and a text of its own.
class Rows final : public ReportSection {
 public:
  explicit Rows(std::string key = "rows", std::string text = {}) : key_(std::move(key)), text_(std::move(text)) {}
  void add_to(nlohmann::json& document) const override { document[key_] = nlohmann::json::array({1, 2}); }
  std::string text() const override { return text_; }

 private:
  std::string key_;
  std::string text_;
};

// A result that knows the outcome better than the run does (diag-bind's cause).
class Cause final : public ReportSection {
 public:
  void add_to(nlohmann::json& document) const override { document["verdict"] = "no_device"; }
  std::optional<std::string> outcome() const override { return "no_device"; }
};

TEST(ReportJson, SectionsAddTheirKeysBesideTheCommonOnes) {
  Report r = sample();
  r.add(Rows());
  r.add(NamedValue("migrate_ms", 1.5));
  r.add(NamedValue("inline_send", true));
  const auto j = to_json(r);
  EXPECT_EQ(j["rows"], nlohmann::json::array({1, 2}));
  EXPECT_DOUBLE_EQ(j["migrate_ms"].get<double>(), 1.5);
  EXPECT_EQ(j["inline_send"], true);
  EXPECT_EQ(j["tool"], "rping");
}

TEST(ReportJson, LatencySummaryValueIsWrittenAsTheRttIs) {
  Report r = sample();
  r.add(NamedValue("join_latency_us", *r.rtt));
  const auto j = to_json(r);
  EXPECT_EQ(j["join_latency_us"], j["rtt_us"]);
}

TEST(ReportJson, ToolSectionsCannotOverwriteCommonKeys) {
  Report r = sample();
  r.add(Rows());
  EXPECT_NO_THROW(to_json(r));
  r.add(Rows("outcome"));  // would hide a failed run's outcome
  EXPECT_THROW(to_json(r), std::logic_error);
}

TEST(ReportJson, ToolSectionsCannotOverwriteEachOther) {
  Report r = sample();
  r.add(Rows());
  r.add(Rows());
  EXPECT_THROW(to_json(r), std::logic_error);
}

TEST(ReportJson, SectionMayNameTheOutcome) {
  Report r = sample();
  r.exit_code = ExitCode::cause_found;
  r.add(Cause());
  const auto j = to_json(r);
  EXPECT_EQ(j["outcome"], "no_device");
  EXPECT_EQ(j["verdict"], "no_device");
  EXPECT_EQ(j["exit_code"], 1);
  r.add(Cause());  // two causes: which one would the report say?
  EXPECT_THROW(to_json(r), std::logic_error);
}

TEST(ReportJson, AttachedDiagnosisGoesUnderItsKey) {
  Report r = sample();
  r.add(AttachedDiagnosis(nlohmann::json{{"verdict", {{"cause", "address_not_local"}}}}));
  EXPECT_EQ(to_json(r)["diagnosis"]["verdict"]["cause"], "address_not_local");
}

TEST(ReportJson, ServedConnectionsListsEachRecord) {
  Report r = sample();
  ConnectionHistory history;
  history.add(ServedConnection{
      .peer = "10.0.0.2:5000", .iterations = 3, .bytes = 384, .outcome = Outcome::completed, .error = {}});
  history.add(ServedConnection{.peer = "10.0.0.3:5000",
                               .iterations = 0,
                               .bytes = 0,
                               .outcome = Outcome::peer_disconnected,
                               .error = "the peer disconnected"});
  r.add(ServedConnections(std::move(history)));
  const auto j = to_json(r);
  ASSERT_EQ(j["connections"].size(), 2u);
  EXPECT_EQ(
      j["connections"][0],
      (nlohmann::json{
          {"peer", "10.0.0.2:5000"}, {"iterations", 3}, {"bytes", 384}, {"outcome", "completed"}, {"error", ""}}));
  EXPECT_EQ(j["connections"][1]["outcome"], "peer_disconnected");
  EXPECT_FALSE(j.contains("earlier_connections"));
  EXPECT_NE(render_text(r).find("3 of 3 iterations"), std::string::npos);  // no text of its own
}

// A server up for months: the latest connections listed, those before folded into totals.
TEST(ReportJson, ServedConnectionsFoldTheOldestIntoTotals) {
  ConnectionHistory history(3);
  for (std::uint64_t k = 1; k <= 5; ++k) {
    history.add(ServedConnection{.peer = "10.0.0." + std::to_string(k) + ":5000",
                                 .iterations = k,
                                 .bytes = 10 * k,
                                 .outcome = k == 2 ? Outcome::failed : Outcome::completed,
                                 .error = {}});
  }
  Report r = sample();
  r.add(ServedConnections(std::move(history)));
  const auto j = to_json(r);
  ASSERT_EQ(j["connections"].size(), 3u);
  EXPECT_EQ(j["connections"][0]["peer"], "10.0.0.3:5000");
  EXPECT_EQ(j["earlier_connections"], (nlohmann::json{{"count", 2}, {"iterations", 3}, {"bytes", 30}, {"failed", 1}}));
}

TEST(ReportOutcome, EveryOutcomeHasItsName) {
  EXPECT_EQ(to_string(Outcome::completed), "completed");
  EXPECT_EQ(to_string(Outcome::interrupted), "interrupted");
  EXPECT_EQ(to_string(Outcome::peer_disconnected), "peer_disconnected");
  EXPECT_EQ(to_string(Outcome::timed_out), "timed_out");
  EXPECT_EQ(to_string(Outcome::failed), "failed");
  EXPECT_EQ(to_string(Outcome::usage_error), "usage_error");
  EXPECT_EQ(to_string(Outcome::unsupported), "unsupported");
}

TEST(ReportOutcome, StopReasonsKeepTheirNames) {
  for (const auto reason : {StopReason::interrupted, StopReason::peer_disconnected, StopReason::timed_out}) {
    EXPECT_EQ(to_string(outcome_of(reason)), to_string(reason));
  }
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
  r.add(Rows("from\xfe"));
  const auto text = json_text(to_json(r));
  const auto parsed = nlohmann::json::parse(text, nullptr, false);
  ASSERT_FALSE(parsed.is_discarded()) << text;
  EXPECT_EQ(parsed["role"], "cli\xc3\xa9nt");
  EXPECT_EQ(parsed["peer_address"], "10.0.0.1\xef\xbf\xbd:7174");
  EXPECT_EQ(parsed["arguments"]["server"], "host\xef\xbf\xbd");
  EXPECT_EQ(parsed["errors"][0]["message"], "peer said \xef\xbf\xbd(");
  EXPECT_EQ(parsed["from\xef\xbf\xbd"], nlohmann::json::array({1, 2}));
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

TEST(ReportJson, CarriesOnlyTheGroupsItsToolHas) {
  Report r = sample();
  r.groups = {.connection = false, .measurement = false};
  const auto bare = to_json(r);
  for (const char* key :
       {"local_address", "peer_address", "cm_timings_ms", "timings_ms", "iterations", "bytes", "rtt_us"}) {
    EXPECT_FALSE(bare.contains(key)) << key;
  }
  for (const char* key :
       {"schema_version", "tool", "role", "arguments", "outcome", "exit_code", "duration_s", "errors"}) {
    EXPECT_TRUE(bare.contains(key)) << key;
  }
  r.groups = {.connection = true, .measurement = false};
  const auto connected = to_json(r);
  EXPECT_EQ(connected["peer_address"], "10.0.0.1:7174");
  EXPECT_TRUE(connected.contains("cm_timings_ms"));
  EXPECT_TRUE(connected.contains("timings_ms"));
  EXPECT_FALSE(connected.contains("iterations"));
  EXPECT_FALSE(connected.contains("rtt_us"));
}

TEST(ReportText, SummaryLeavesOutTheGroupsTheToolLacks) {
  Report r = sample();
  r.groups = {.connection = false, .measurement = false};
  const auto text = render_text(r);
  EXPECT_EQ(text.find("iterations"), std::string::npos) << text;
  EXPECT_EQ(text.find("peer"), std::string::npos) << text;
  EXPECT_EQ(text.find("cm:"), std::string::npos) << text;
  EXPECT_EQ(text.find("rtt"), std::string::npos) << text;
  EXPECT_NE(text.find("rping client: 0.000 s, completed"), std::string::npos) << text;
}

TEST(ReportText, AToolWithoutARoleIsNamedAlone) {
  Report r = sample();
  r.tool = "rdmakit-diag-bind";
  r.role.clear();
  r.groups = {.connection = false, .measurement = false};
  EXPECT_EQ(render_text(r), "rdmakit-diag-bind: 0.000 s, completed\n");
}

TEST(ReportText, SectionTextReplacesTheSummary) {
  Report r = sample();
  r.add(Rows("rows", "table\n"));
  r.add(NamedValue("migrate_ms", 1.5));  // no text of its own
  EXPECT_EQ(render_text(r), "table\n");
}

TEST(ReportText, UsageErrorPrintsNothing) {
  Report r = sample();
  r.add(Rows("rows", "table\n"));
  r.fail(ErrorRecord{.message = "bad flag", .call = {}, .errnum = 0, .hint = {}, .completion = {}}, ExitCode::usage);
  EXPECT_EQ(render_text(r), "");
}

TEST(ReportText, SectionOutcomeShowsInTheSummary) {
  Report r = sample();
  r.add(Cause());
  EXPECT_NE(render_text(r).find(", no_device\n"), std::string::npos);
}

TEST(ReportText, SummarisesRun) {
  const auto text = render_text(sample());
  EXPECT_NE(text.find("3 of 3 iterations"), std::string::npos);
  EXPECT_NE(text.find("connect 1.500 ms"), std::string::npos);
  EXPECT_NE(text.find("p99.9"), std::string::npos);
}

}  // namespace
}  // namespace rdmakit
