#include <gtest/gtest.h>

#include <vector>

#include "lib/cli.hpp"
#include "lib/log.hpp"

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

TEST(LogLevel, ParsesKnownNamesOnly) {
  EXPECT_EQ(parse_log_level("debug"), spdlog::level::debug);
  EXPECT_EQ(parse_log_level("off"), spdlog::level::off);
  EXPECT_FALSE(parse_log_level("verbose").has_value());
}

}  // namespace
}  // namespace rdmakit
