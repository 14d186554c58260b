// rdma_smoke without a device: its plan, the child processes it runs (plain shell
// commands stand in for the tools), how it judges a run, and its JUnit XML.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <pugixml.hpp>

#include "lib/base/error.hpp"
#include "lib/smoke/plan.hpp"
#include "lib/smoke/remote.hpp"
#include "lib/smoke/run.hpp"
#include "lib/smoke/smoke_report.hpp"

namespace rdmakit::smoke {
namespace {

PlanOptions plan_for(std::vector<std::string> tools = {}, std::vector<std::string> skip = {}, bool quick = false) {
  return {.address = "10.0.0.1",
          .local_address = {},
          .first_port = 20000,
          .quick = quick,
          .timeout_s = 5,
          .case_seconds = 60,
          .tools = std::move(tools),
          .skip = std::move(skip)};
}

std::vector<std::string> names(const std::vector<SmokeCase>& cases) {
  std::vector<std::string> out;
  for (const auto& c : cases) out.push_back(c.name);
  return out;
}

bool has(const std::vector<std::string>& args, const std::string& a, const std::string& b) {
  for (std::size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == a && args[i + 1] == b) return true;
  }
  return false;
}

TEST(SmokePlan, EveryToolInOrderEachListenerOnItsOwnPort) {
  const auto cases = plan_cases(plan_for());
  EXPECT_EQ(names(cases), (std::vector<std::string>{"diag-bind", "rping", "rdma_server", "udaddy", "ucmatose", "mckey",
                                                    "send_bw.bandwidth", "send_bw.latency"}));
  std::vector<std::uint16_t> ports;
  for (const auto& c : cases) {
    if (c.port != 0) ports.push_back(c.port);
    EXPECT_TRUE(has(c.client.args, "--timeout", "5")) << c.name;
    EXPECT_NE(std::ranges::find(c.client.args, "--json"), c.client.args.end()) << c.name;
    for (const auto& server : c.servers) {
      // A server can wait no longer than its case.
      if (c.ready_line.empty()) {
        EXPECT_TRUE(has(server.args, "--accept-timeout", "60")) << c.name;
      }
    }
  }
  auto sorted = ports;
  std::ranges::sort(sorted);
  EXPECT_EQ(std::ranges::adjacent_find(sorted), sorted.end());
  EXPECT_EQ(ports.front(), 20000);
  const auto& ucmatose = cases[4];
  EXPECT_TRUE(has(ucmatose.client.args, "-c", "8"));
  EXPECT_EQ(ucmatose.servers.front().tool, "ucmatose");
  EXPECT_EQ(cases[2].client.tool, "rdma_client");
  EXPECT_EQ(cases[5].ready_line, "joined");
  EXPECT_TRUE(has(cases[7].client.args, "--lat", "-s"));
}

TEST(SmokePlan, ToolsSkipAndQuick) {
  EXPECT_EQ(names(plan_cases(plan_for({"rping", "mckey"}))), (std::vector<std::string>{"rping", "mckey"}));
  const auto skipped = names(plan_cases(plan_for({}, {"send_bw", "diag-bind"})));
  EXPECT_EQ(skipped, (std::vector<std::string>{"rping", "rdma_server", "udaddy", "ucmatose", "mckey"}));
  const auto quick = plan_cases(plan_for({}, {}, true));
  EXPECT_EQ(names(quick), (std::vector<std::string>{"diag-bind", "rping", "udaddy", "send_bw.bandwidth"}));
  EXPECT_TRUE(has(quick[1].client.args, "-C", "3"));
  // --quick with --tools keeps the tools asked for, in the small size.
  EXPECT_EQ(names(plan_cases(plan_for({"ucmatose"}, {}, true))), std::vector<std::string>{"ucmatose"});
}

TEST(SmokePlan, RefusesUnknownToolsAnEmptySelectionAndNoAddress) {
  EXPECT_THROW(plan_cases(plan_for({"ib_send_bw"})), UsageError);
  EXPECT_THROW(plan_cases(plan_for({}, {"nothing"})), UsageError);
  EXPECT_THROW(plan_cases(plan_for({"rping"}, {"rping"})), UsageError);
  auto no_address = plan_for({"rping"});
  no_address.address.clear();
  EXPECT_THROW(plan_cases(no_address), UsageError);
  // diag-bind alone checks the host without one.
  no_address.tools = {"diag-bind"};
  const auto cases = plan_cases(no_address);
  ASSERT_EQ(cases.size(), 1U);
  EXPECT_EQ(cases[0].client.args, (std::vector<std::string>{"--json", "--timeout", "5"}));
}

ToolRun run_with(int exit_code, const std::string& out, const std::string& err = {}) {
  ToolRun run;
  run.role = "client";
  run.command = {"/usr/bin/rping", "-c"};
  run.outcome.exit_code = exit_code;
  run.outcome.out = out;
  run.outcome.err = err;
  run.report = nlohmann::json::parse(out, nullptr, false);
  if (!run.report.is_object()) run.report = nullptr;
  return run;
}

TEST(SmokeJudge, TheToolsOwnErrorFirstThenItsVerdictThenItsLastLine) {
  EXPECT_EQ(failure_of(run_with(0, "{}")), "");
  EXPECT_EQ(failure_of(run_with(1, R"({"errors":[{"message":"rdma_connect: Connection refused","hint":"h"}]})")),
            "rdma_connect: Connection refused (exit 1)");
  EXPECT_EQ(failure_of(run_with(1, R"({"errors":[],"verdict":{"cause":"netdev_down","summary":"rxenet0 is down"}})")),
            "netdev_down: rxenet0 is down (exit 1)");
  EXPECT_EQ(failure_of(run_with(2, "", "rping: --port: bad\n\n")), "rping: --port: bad (exit 2)");
  auto killed = run_with(-1, "");
  killed.outcome.signal = SIGSEGV;
  EXPECT_EQ(failure_of(killed), "killed by signal 11 (SEGV)");
  auto late = run_with(-1, "");
  late.outcome.signal = SIGTERM;
  late.outcome.timed_out = true;
  late.outcome.seconds = 60;
  EXPECT_EQ(failure_of(late), "still running after 60 s, ended");
}

SmokeRun sample_run() {
  SmokeRun run;
  run.addresses = {"10.0.0.1"};
  CaseResult passed;
  passed.name = "rping";
  passed.tool = "rping";
  passed.address = "10.0.0.1";
  passed.outcome = CaseOutcome::passed;
  passed.seconds = 1.25;
  passed.runs.push_back(run_with(0, R"({"tool":"rping"})"));
  CaseResult failed = passed;
  failed.name = "send_bw.latency";
  failed.tool = "send_bw";
  failed.outcome = CaseOutcome::failed;
  failed.reason = "send_bw (client): rdma_connect: <refused> & \x01 gone (exit 1)";
  failed.hint = "is the server running?";
  CaseResult skipped = passed;
  skipped.name = "mckey";
  skipped.tool = "mckey";
  skipped.outcome = CaseOutcome::skipped;
  skipped.reason = "IPv6 multicast is not supported on RoCE v2";
  run.cases = {passed, failed, skipped};
  run.seconds = 5;
  return run;
}

TEST(SmokeReport, JUnitCountsEachOutcomeAndCarriesReasonsAndReports) {
  const auto xml = junit_xml(sample_run(), "host1");
  pugi::xml_document document;
  ASSERT_TRUE(document.load_string(xml.c_str())) << xml;
  const auto suites = document.child("testsuites");
  EXPECT_EQ(suites.attribute("tests").as_int(), 3);
  EXPECT_EQ(suites.attribute("failures").as_int(), 1);
  EXPECT_EQ(suites.attribute("skipped").as_int(), 1);
  const auto suite = suites.child("testsuite");
  EXPECT_STREQ(suite.attribute("name").value(), "rdma_smoke 10.0.0.1");
  EXPECT_STREQ(suite.attribute("hostname").value(), "host1");
  const auto failed = suite.find_child_by_attribute("testcase", "name", "send_bw.latency");
  EXPECT_STREQ(failed.attribute("classname").value(), "rdma_smoke.send_bw");
  // Markup in a reason is escaped, and a control character XML cannot hold is replaced.
  EXPECT_STREQ(failed.child("failure").attribute("message").value(),
               "send_bw (client): rdma_connect: <refused> & ? gone (exit 1)");
  EXPECT_NE(std::string(failed.child("failure").text().get()).find("hint: is the server running?"), std::string::npos);
  const auto skipped = suite.find_child_by_attribute("testcase", "name", "mckey");
  EXPECT_STREQ(skipped.child("skipped").attribute("message").value(), "IPv6 multicast is not supported on RoCE v2");
  const auto passed = suite.find_child_by_attribute("testcase", "name", "rping");
  EXPECT_TRUE(passed.child("failure").empty());
  EXPECT_NE(std::string(passed.child("system-out").text().get()).find("\"tool\": \"rping\""), std::string::npos);
  EXPECT_STREQ(passed.attribute("time").value(), "1.250");
}

// A run that ended before its cases (the peer's key handshake failed) is one error in the
// XML, not zero tests, so that a CI reporter shows it failed.
TEST(SmokeReport, JUnitOfARunEndedBeforeItsCasesIsAnError) {
  SmokeRun run;
  run.seconds = 3.5;
  run.aborted = "the key handshake with 10.0.0.1:7473: truncated";
  const auto xml = junit_xml(run, "host1");
  pugi::xml_document document;
  ASSERT_TRUE(document.load_string(xml.c_str())) << xml;
  const auto suites = document.child("testsuites");
  EXPECT_EQ(suites.attribute("tests").as_int(), 1);
  EXPECT_EQ(suites.attribute("errors").as_int(), 1);
  const auto error = suites.child("testsuite").child("testcase").child("error");
  EXPECT_STREQ(error.attribute("message").value(), "the key handshake with 10.0.0.1:7473: truncated") << xml;
}

TEST(SmokeReport, TableAndJsonCountTheSame) {
  const auto run = sample_run();
  const auto json = to_json(run);
  EXPECT_EQ(json["passed"], 1);
  EXPECT_EQ(json["failed"], 1);
  EXPECT_EQ(json["skipped"], 1);
  EXPECT_EQ(json["cases"][1]["hint"], "is the server running?");
  const auto table = render_table(run);
  EXPECT_NE(table.find("1 passed, 1 failed, 1 skipped"), std::string::npos) << table;
  EXPECT_NE(table.find("hint: is the server running?"), std::string::npos) << table;
}

}  // namespace
}  // namespace rdmakit::smoke

namespace rdmakit::smoke {
namespace {

TEST(SmokeRemote, ThePlanCrossesAndComesBackTheSame) {
  PeerPlan mine{.forward = {.address = "10.0.0.2",
                            .local_address = "10.0.0.1",
                            .first_port = 21000,
                            .quick = true,
                            .timeout_s = 3,
                            .case_seconds = 40,
                            .tools = {"rping", "mckey"},
                            .skip = {},
                            .direction = Direction::forward},
                .run_forward = true,
                .run_reverse = true};
  const auto theirs = plan_from_request(plan_request(mine), "10.0.0.2", std::nullopt);
  EXPECT_EQ(theirs.forward.first_port, 21000);
  EXPECT_TRUE(theirs.forward.quick);
  EXPECT_EQ(theirs.forward.tools, mine.forward.tools);
  EXPECT_EQ(theirs.forward.local_address, "10.0.0.1");
  EXPECT_TRUE(theirs.run_forward && theirs.run_reverse);
  // Both sides list the same cases, each tool forward then reverse.
  EXPECT_EQ(names(peer_cases(mine)), names(peer_cases(theirs)));
  EXPECT_EQ(names(peer_cases(mine)), (std::vector<std::string>{"rping", "rping.reverse", "mckey", "mckey.reverse"}));
  // Forward, the mckey sender (the client) binds the --peer side's address and the receiver
  // the serving side's; reverse, the other way round.
  const auto cases = peer_cases(theirs);
  EXPECT_TRUE(has(cases[2].client.args, "-b", "10.0.0.1"));
  EXPECT_TRUE(has(cases[2].servers.front().args, "-b", "10.0.0.2"));
  EXPECT_TRUE(has(cases[3].client.args, "-b", "10.0.0.2"));
  EXPECT_TRUE(has(cases[3].servers.front().args, "-b", "10.0.0.1"));
  // The reverse rping listens on the --peer side's address, on a port after the forward ones.
  EXPECT_EQ(cases[1].direction, Direction::reverse);
  EXPECT_EQ(cases[1].address, "10.0.0.1");
  EXPECT_EQ(cases[1].port, 21000 + ports_per_plan);
  EXPECT_TRUE(has(cases[1].client.args, "-a", "10.0.0.1"));
  // One direction alone.
  mine.run_forward = false;
  EXPECT_EQ(names(peer_cases(plan_from_request(plan_request(mine), "10.0.0.2", std::nullopt))),
            (std::vector<std::string>{"rping.reverse", "mckey.reverse"}));
}

TEST(SmokeRemote, WhatThePeerSendsIsChecked) {
  PeerPlan plan{.forward = plan_for(), .run_forward = true, .run_reverse = true};
  plan.forward.local_address = "10.0.0.3";
  auto request = plan_request(plan);
  request["timeout_s"] = -1;
  EXPECT_THROW(plan_from_request(request, "10.0.0.2", std::nullopt), ProtocolError);
  request = plan_request(plan);
  request["tools"] = "rping";
  EXPECT_THROW(plan_from_request(request, "10.0.0.2", std::nullopt), ProtocolError);
  request.erase("tools");
  EXPECT_THROW(plan_from_request(request, "10.0.0.2", std::nullopt), ProtocolError);
  // The address this side's clients would go to must be a numeric one, not a word for a shell.
  for (const auto* bad_address : {"", "host.example", "10.0.0.1; reboot", "-h"}) {
    request = plan_request(plan);
    request["peer_address"] = bad_address;
    EXPECT_THROW(plan_from_request(request, "10.0.0.2", std::nullopt), ProtocolError) << bad_address;
  }
  request = plan_request(plan);
  request["peer_address"] = "fd55::2";
  EXPECT_NO_THROW(plan_from_request(request, "10.0.0.2", std::nullopt));
  request["forward"] = false;
  request["reverse"] = false;
  EXPECT_THROW(plan_from_request(request, "10.0.0.2", std::nullopt), ProtocolError);
  request = plan_request(plan);
  request["first_port"] = 65530;
  EXPECT_THROW(plan_from_request(request, "10.0.0.2", std::nullopt), ProtocolError);
  // Clients here go to the control connection's peer only, not to an address it names.
  request = plan_request(plan);
  EXPECT_NO_THROW(plan_from_request(request, "10.0.0.2", IpAddress::parse("10.0.0.3")));
  EXPECT_NO_THROW(plan_from_request(request, "10.0.0.2", IpAddress::parse("::ffff:10.0.0.3")));
  try {
    plan_from_request(request, "10.0.0.2", IpAddress::parse("10.0.0.9"));
    ADD_FAILURE() << "a peer_address other than the control peer was taken";
  } catch (const ProtocolError& refused) {
    EXPECT_STREQ(refused.what(),
                 "'peer_address' 10.0.0.3 is not the address the request came from (10.0.0.9): clients here go to "
                 "the control peer only");
  }

  ToolRun run = run_with(0, R"({"tool":"rping"})");
  run.role = "server";
  const auto item = to_json(run);
  const auto back = tool_run_from_json(item, "server");
  EXPECT_EQ(back.command, run.command);
  EXPECT_EQ(back.report, run.report);
  EXPECT_THROW(tool_run_from_json(item, "client"), ProtocolError);
  auto bad = item;
  bad["report"] = "a string";
  EXPECT_THROW(tool_run_from_json(bad, "server"), ProtocolError);
  bad = item;
  bad["exit_code"] = "0";
  EXPECT_THROW(tool_run_from_json(bad, "server"), ProtocolError);
}

TEST(SmokePlan, AnIpv6AddressGetsAnIpv6Group) {
  auto options = plan_for({"mckey"});
  options.address = "fd55::1";
  EXPECT_TRUE(has(plan_cases(options).front().client.args, "-m", "ff15::4e20"));
}

}  // namespace
}  // namespace rdmakit::smoke
