#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "lib/base/log.hpp"
#include "lib/tool/cli.hpp"
#include "lib/tool/cli_checks.hpp"

namespace rdmakit {
namespace {

int run_with(std::vector<std::string> args, bool& body_ran) {
  ToolRunner tool("testtool", "test");
  int value = 0;
  tool.app().add_option("-n", value)->check(CLI::Range(1, 10));
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  body_ran = false;
  return tool.run(
      static_cast<int>(argv.size()), argv.data(),
      [&] {
        if (value == 7) {
          throw UsageError("seven is not allowed");
        }
      },
      [&](Report&) { body_ran = true; });
}

TEST(ToolRunner, UnknownFlagIsUsageError) {
  bool ran = false;
  EXPECT_EQ(run_with({"testtool", "--bogus"}, ran), 2);
  EXPECT_FALSE(ran);
}

TEST(ToolRunner, OutOfRangeValueIsUsageError) {
  bool ran = false;
  EXPECT_EQ(run_with({"testtool", "-n", "11"}, ran), 2);
  EXPECT_EQ(run_with({"testtool", "-n", "abc"}, ran), 2);
  EXPECT_FALSE(ran);
}

TEST(ToolRunner, CrossOptionRuleIsUsageError) {
  bool ran = false;
  EXPECT_EQ(run_with({"testtool", "-n", "7"}, ran), 2);
  EXPECT_FALSE(ran);
}

TEST(ToolRunner, BadTimeoutAndLogLevelAreUsageErrors) {
  bool ran = false;
  EXPECT_EQ(run_with({"testtool", "--timeout", "0"}, ran), 2);
  EXPECT_EQ(run_with({"testtool", "--log-level", "loud"}, ran), 2);
  EXPECT_FALSE(ran);
}

// A floating-point option as the tools declare theirs: FiniteNumber, then a Range.
struct SecondsRun {
  int exit_code = 0;
  bool body_ran = false;
  std::string err;  // what went to stderr
  double seconds = -1;
};

SecondsRun run_seconds(std::vector<std::string> args, bool with_range = true) {
  ToolRunner tool("testtool", "test");
  SecondsRun result;
  auto* option = tool.app().add_option("--seconds", result.seconds)->check(FiniteNumber());
  if (with_range) option->check(CLI::Range(0.0, 86400.0));
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  testing::internal::CaptureStderr();
  result.exit_code = tool.run(
      static_cast<int>(argv.size()), argv.data(), [] {}, [&](Report&) { result.body_ran = true; });
  result.err = testing::internal::GetCapturedStderr();
  return result;
}

TEST(FiniteNumber, NanAndInfinityAreUsageErrors) {
  for (const char* text : {"nan", "NaN", "-nan", "nan(0x1)", "inf", "-inf", "Infinity", "1e400", "0x1p2000"}) {
    for (const bool with_range : {true, false}) {
      const auto run = run_seconds({"testtool", "--seconds", text}, with_range);
      EXPECT_EQ(run.exit_code, 2) << text;
      EXPECT_FALSE(run.body_ran) << text;
      // One line, as every usage error: what is wrong, and where to look.
      EXPECT_EQ(run.err,
                "testtool: --seconds: '" + std::string(text) + "' is not a finite number (see 'testtool --help')\n")
          << text;
    }
  }
}

TEST(FiniteNumber, LeavesFiniteValuesAndOtherErrorsAlone) {
  auto run = run_seconds({"testtool", "--seconds", "2.5"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_TRUE(run.body_ran);
  EXPECT_DOUBLE_EQ(run.seconds, 2.5);
  run = run_seconds({"testtool", "--seconds", "1e-300"});
  EXPECT_EQ(run.exit_code, 0);
  // Not numbers at all, or out of range: the conversion's and the Range's messages, as before.
  run = run_seconds({"testtool", "--seconds", "5s"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--seconds: Value 5s not in range"), std::string::npos) << run.err;
  run = run_seconds({"testtool", "--seconds", "-1"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--seconds: Value -1 not in range"), std::string::npos) << run.err;
  run = run_seconds({"testtool", "--seconds", "abc"}, false);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err.find("finite"), std::string::npos) << run.err;
}

TEST(FiniteNumber, GuardsTheCommonTimeout) {
  for (const char* text : {"nan", "NaN", "inf"}) {
    const auto run = run_seconds({"testtool", "--timeout", text});
    EXPECT_EQ(run.exit_code, 2) << text;
    EXPECT_FALSE(run.body_ran) << text;
    EXPECT_NE(run.err.find("--timeout: '" + std::string(text) + "' is not a finite number"), std::string::npos)
        << run.err;
  }
}

TEST(ToolRunner, JsonOnStdoutAndInTheFileIsOneValidText) {
  const auto path = std::filesystem::temp_directory_path() / ("rdmakit-json-file-" + std::to_string(::getpid()));
  ToolRunner tool("testtool", "test");
  tool.enable_json_file();
  std::vector<std::string> args = {"testtool", "--json", "--json-file", path.string()};
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const int exit_code = tool.run(
      static_cast<int>(argv.size()), argv.data(), [] {},
      [](Report& report) {
        // What a peer or a failing call may hand over: bytes that are not UTF-8.
        report.peer_address = "10.0.0.1\xff";
        report.fail(ErrorRecord{.message = "refused: \xc0", .call = {}, .errnum = 0, .hint = {}, .completion = {}});
      });
  const auto out = testing::internal::GetCapturedStdout();
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(exit_code, 1);
  std::ifstream in(path);
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  EXPECT_EQ(out, written);  // the same text, once serialized
  const auto report = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << out;
  EXPECT_EQ(report["peer_address"], "10.0.0.1\xef\xbf\xbd");
  EXPECT_EQ(report["errors"][0]["message"], "refused: \xef\xbf\xbd");
}

TEST(ToolRunner, UsageErrorJsonIsValidWhateverTheArgument) {
  std::vector<std::string> args = {"testtool", "--json", "--bogus\xff"};
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  ToolRunner tool("testtool", "test");
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const int exit_code = tool.run(
      static_cast<int>(argv.size()), argv.data(), [] {}, [](Report&) {});
  const auto out = testing::internal::GetCapturedStdout();
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(exit_code, 2);
  const auto report = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << out;
  EXPECT_EQ(report["outcome"], "usage_error");
  EXPECT_NE(report["errors"][0]["message"].get<std::string>().find("--bogus\xef\xbf\xbd"), std::string::npos);
}

// A tool's groups hold for every report it prints: a usage error's as much as a run's.
TEST(ToolRunner, ReportGroupsHoldForRunsAndUsageErrors) {
  for (const bool usage_error : {false, true}) {
    std::vector<std::string> args = {"testtool", "--json"};
    if (usage_error) args.emplace_back("--bogus");
    std::vector<char*> argv;
    for (auto& a : args) {
      argv.push_back(a.data());
    }
    ToolRunner tool("testtool", "test");
    tool.report_groups({.connection = true, .measurement = false});
    testing::internal::CaptureStdout();
    testing::internal::CaptureStderr();
    tool.run(
        static_cast<int>(argv.size()), argv.data(), [] {}, [](Report&) {});
    const auto out = testing::internal::GetCapturedStdout();
    testing::internal::GetCapturedStderr();
    const auto report = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(report.is_discarded()) << out;
    EXPECT_TRUE(report.contains("peer_address")) << out;
    EXPECT_FALSE(report.contains("iterations")) << out;
    EXPECT_FALSE(report.contains("bytes")) << out;
    EXPECT_FALSE(report.contains("rtt_us")) << out;
  }
}

TEST(ProgramPrefix, TheExecutableFirstThenTheInvokedName) {
  EXPECT_EQ(program_prefix("rdma_smoke", "/usr/bin/rdmakit-rdma_smoke", "rdmakit-rdma_smoke"), "rdmakit-");
  // A symlink under the plain name still runs the package's siblings, never the stock rping
  // that rdmacm-utils puts beside them.
  EXPECT_EQ(program_prefix("rdma_smoke", "/usr/bin/rdmakit-rdma_smoke", "/usr/local/bin/rdma_smoke"), "rdmakit-");
  EXPECT_EQ(program_prefix("rdma_smoke", "/work/build/bin/rdma_smoke", "./rdma_smoke"), "");
  // A program whose file is not the tool's (the unit tests): the name it was invoked by.
  EXPECT_EQ(program_prefix("rping", "/work/build/bin/unit_tests", "/opt/x/rdmakit-rping"), "rdmakit-");
  EXPECT_EQ(program_prefix("rping", "", "ping"), "");
}

// rdma_smoke starts its siblings by these names: the runner's prefix, the one its hints use.
TEST(ToolRunner, NamesSiblingsUnderItsPrefix) {
  for (const auto& [invoked, expected] :
       {std::pair<std::string, std::string>{"/usr/bin/rdmakit-rdma_smoke", "rdmakit-rping"}, {"rdma_smoke", "rping"}}) {
    ToolRunner tool("rdma_smoke", "test");
    std::vector<std::string> args = {invoked};
    std::vector<char*> argv;
    for (auto& a : args) {
      argv.push_back(a.data());
    }
    std::string in_validate;
    std::string in_body;
    testing::internal::CaptureStdout();
    tool.run(
        static_cast<int>(argv.size()), argv.data(), [&] { in_validate = tool.names().sibling("rping"); },
        [&](Report&) { in_body = tool.names().sibling("rping"); });
    testing::internal::GetCapturedStdout();
    EXPECT_EQ(in_validate, expected) << invoked;
    EXPECT_EQ(in_body, expected) << invoked;
  }
}

// Under the package's names, a hint built from the run names the installed siblings, on
// stderr and in the JSON alike: the report hands the body the prefix (Report::siblings), and
// what the body writes is printed as written, a tool's name in it included.
TEST(ToolRunner, HintsNameSiblingsAsInstalled) {
  for (const auto& [invoked, diag_bind] :
       {std::pair<std::string, std::string>{"/opt/x/rdmakit-rping", "rdmakit-diag-bind"},
        {"/work/build/bin/rping", "diag-bind"}}) {
    ToolRunner tool("rping", "test");
    std::vector<std::string> args = {invoked, "--json"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    SiblingNames seen;
    testing::internal::CaptureStdout();
    testing::internal::CaptureStderr();
    tool.run(
        static_cast<int>(argv.size()), argv.data(), [] {},
        [&](Report& report) {
          seen = report.siblings;
          report.peer_address = "diag-bind";  // printed as written
          throw RdmaError("rdma_bind_addr", "10.0.0.9:7174", ENODEV, "10.0.0.9");
        });
    const auto out = testing::internal::GetCapturedStdout();
    const auto err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(seen.diag_bind(), diag_bind);
    const std::string hint = "run '" + diag_bind + " 10.0.0.9' (or add --diagnose)";
    EXPECT_NE(err.find(hint), std::string::npos) << err;
    const auto document = nlohmann::json::parse(out);
    EXPECT_EQ(document.at("tool"), "rping");
    EXPECT_NE(document.at("errors").at(0).at("hint").get<std::string>().find(hint), std::string::npos) << out;
    EXPECT_EQ(document.at("peer_address"), "diag-bind") << out;
  }
}

TEST(LogLevel, ParsesKnownNamesOnly) {
  EXPECT_EQ(parse_log_level("debug"), spdlog::level::debug);
  EXPECT_EQ(parse_log_level("off"), spdlog::level::off);
  EXPECT_FALSE(parse_log_level("verbose").has_value());
}

enum class Shape : std::uint8_t { round = 0, square = 1 };

std::ostream& operator<<(std::ostream& out, Shape shape) {
  return out << (shape == Shape::round ? "round" : "square");
}

TEST(ArgumentsOf, EveryOptionByLongNameTypedWithItsValueOrDefault) {
  CLI::App app("test", "testtool");
  std::string address;
  std::uint16_t port = 7174;
  double wait_s = 1.5;
  bool loud = false;
  std::optional<int> tos;
  std::string format = "name";
  auto shape = Shape::round;
  app.add_option("server", address);
  app.add_option("-p,--port", port);
  app.add_option("--wait", wait_s);
  app.add_flag("-l,--be-loud", loud);
  app.add_option("-t,--tos", tos);
  app.add_option("-f,--address-format", format)->capture_default_str();
  app.add_option("--shape", shape)
      ->transform(one_of<Shape>({{"round", Shape::round}, {"square", Shape::square}}))
      ->default_str("round");
  app.add_option("-x", port)->group("");  // hidden: not an argument
  std::vector<std::string> args = {"testtool", "10.0.0.1", "-p", "9", "-l", "--shape", "square"};
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  app.parse(static_cast<int>(argv.size()), argv.data());
  wait_s = 2.5;  // what the tool made of its options is what the report says

  const auto arguments = arguments_of(app, {{"address-format", "format"}});
  const nlohmann::json expected = {{"server", "10.0.0.1"}, {"port", 9},        {"wait", 2.5},      {"be_loud", true},
                                   {"tos", nullptr},       {"format", "name"}, {"shape", "square"}};
  EXPECT_EQ(arguments, expected) << arguments.dump();
}

TEST(ToolRunner, FillsTheReportArgumentsFromItsOptions) {
  ToolRunner tool("testtool", "test");
  int count = 3;
  tool.app().add_option("-n,--count", count);
  std::string arg0 = "testtool";
  std::vector<char*> argv = {arg0.data()};
  nlohmann::json seen;
  tool.run(
      1, argv.data(), [] {}, [&](Report& report) { seen = report.arguments; });
  EXPECT_EQ(seen["count"], 3);
  EXPECT_EQ(seen["timeout_s"], 5.0);
  EXPECT_EQ(seen["log_level"], "warn");
  EXPECT_EQ(seen["json"], false);
  EXPECT_FALSE(seen.contains("help"));
  EXPECT_FALSE(seen.contains("version"));
}

TEST(ServerOptions, AddsPersistentAndAcceptTimeout) {
  CLI::App app("test", "testtool");
  ServerOptions serving;
  serving.add_to(app, "persist", "wait");
  EXPECT_FALSE(serving.accept_timeout());
  std::vector<std::string> args = {"testtool", "-P", "--accept-timeout", "1.5"};
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  app.parse(static_cast<int>(argv.size()), argv.data());
  EXPECT_TRUE(serving.persistent);
  EXPECT_EQ(serving.accept_timeout(), std::chrono::milliseconds(1500));
  EXPECT_THROW(app.parse("--accept-timeout nan", false), CLI::ValidationError);
}

}  // namespace
}  // namespace rdmakit
