#include <CLI/CLI.hpp>

#include "lib/tool/shell_completion.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/tool/cli.hpp"

namespace rdmakit {
namespace {

// An app shaped like send_bw's, with every kind of option the generator distinguishes.
struct SampleTool {
  ToolRunner runner{"sample", "a tool for the tests"};
  std::string op = "send";
  std::string mode;
  std::string replay;
  int port = 1;
  bool all = false;
  std::string server;

  SampleTool() {
    auto& app = runner.app();
    runner.enable_json_file();
    app.add_option("server", server, "positional");
    app.add_option("--op", op, "send, write or read")->check(CLI::IsMember({"send", "write", "read"}));
    app.add_option("--mode", mode, "a mapping")
        ->transform(CLI::CheckedTransformer(std::map<std::string, std::string>{{"fast", "1"}, {"slow", "2"}}));
    app.add_option("--replay", replay, "a captured host")->type_name("DIR");
    app.add_option("-p,--port", port, "Port")->check(CLI::Range(1, 65535));
    app.add_flag("-a,--all", all, "Sweep");
    app.add_flag("--secret", all, "hidden")->group("");
  }
};

const CompletionOption* find(const std::vector<CompletionOption>& options, const std::string& name) {
  for (const auto& option : options) {
    if (std::find(option.names.begin(), option.names.end(), name) != option.names.end()) {
      return &option;
    }
  }
  return nullptr;
}

TEST(CompletionOptions, ReadsNamesValuesAndPathsFromTheApp) {
  SampleTool tool;
  const auto options = completion_options(tool.runner.app());

  const auto* port = find(options, "--port");
  ASSERT_NE(port, nullptr);
  EXPECT_EQ(port->names, (std::vector<std::string>{"-p", "--port"}));
  EXPECT_TRUE(port->takes_value);
  EXPECT_TRUE(port->values.empty());  // a range is not a list

  const auto* all = find(options, "-a");
  ASSERT_NE(all, nullptr);
  EXPECT_FALSE(all->takes_value);

  ASSERT_NE(find(options, "--op"), nullptr);
  EXPECT_EQ(find(options, "--op")->values, (std::vector<std::string>{"send", "write", "read"}));
  ASSERT_NE(find(options, "--mode"), nullptr);
  EXPECT_EQ(find(options, "--mode")->values, (std::vector<std::string>{"fast", "slow"}));
  ASSERT_NE(find(options, "--log-level"), nullptr);
  EXPECT_EQ(find(options, "--log-level")->values,
            (std::vector<std::string>{"trace", "debug", "info", "warn", "error", "critical", "off"}));

  ASSERT_NE(find(options, "--json-file"), nullptr);
  EXPECT_EQ(find(options, "--json-file")->path, CompletionOption::Path::file);
  ASSERT_NE(find(options, "--replay"), nullptr);
  EXPECT_EQ(find(options, "--replay")->path, CompletionOption::Path::directory);

  EXPECT_NE(find(options, "--help"), nullptr);
  EXPECT_NE(find(options, "--version"), nullptr);
  EXPECT_EQ(find(options, "--secret"), nullptr);  // group "": hidden from help, so from completion
  EXPECT_EQ(find(options, "server"), nullptr);
}

TEST(BashCompletion, RegistersTheInstalledName) {
  SampleTool tool;
  const auto script = bash_completion(tool.runner.app(), "rdmakit-sample");
  EXPECT_NE(script.find("\ncomplete -F _rdmakit_complete_rdmakit_sample rdmakit-sample\n"), std::string::npos);
  EXPECT_EQ(script.find("--secret"), std::string::npos);
  EXPECT_THROW(bash_completion(tool.runner.app(), "two words"), std::invalid_argument);
  EXPECT_THROW(bash_completion(tool.runner.app(), "$(reboot)"), std::invalid_argument);
}

// Runs the generated function the way bash's programmable completion would, on `words`
// (the last one is being completed), and returns COMPREPLY.
class BashRun : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("bash -c true >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "no bash here";
    }
    script_ = std::filesystem::temp_directory_path() / ("rdmakit-completion-" + std::to_string(getpid()));
    std::filesystem::create_directories(script_.parent_path());
    std::ofstream(script_) << bash_completion(tool_.runner.app(), "rdmakit-sample");
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove(script_, ignored);
  }

  std::vector<std::string> complete(const std::vector<std::string>& words) {
    std::string array;
    for (const auto& word : words) {
      array += " '" + word + "'";
    }
    const std::string command = "bash --norc --noprofile -c 'source \"$0\" || exit 9; COMP_WORDS=(" +
                                shell_escape(array) + "); COMP_CWORD=" + std::to_string(words.size() - 1) +
                                "; _rdmakit_complete_rdmakit_sample; printf \"%s\\n\" \"${COMPREPLY[@]}\"' " +
                                script_.string();
    std::vector<std::string> reply;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) {
      ADD_FAILURE() << "popen failed";
      return reply;
    }
    std::string line;
    for (int c = std::fgetc(pipe); c != EOF; c = std::fgetc(pipe)) {
      if (c == '\n') {
        if (!line.empty()) reply.push_back(line);
        line.clear();
      } else {
        line += static_cast<char>(c);
      }
    }
    EXPECT_EQ(pclose(pipe), 0) << command;
    return reply;
  }

  // Inside the single-quoted bash -c argument: ' becomes '\''.
  static std::string shell_escape(const std::string& text) {
    std::string out;
    for (const char c : text) {
      out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    }
    return out;
  }

  SampleTool tool_;
  std::filesystem::path script_;
};

using Words = std::vector<std::string>;

TEST_F(BashRun, CompletesLongAndShortNames) {
  const auto longs = complete({"rdmakit-sample", "--"});
  EXPECT_NE(std::find(longs.begin(), longs.end(), "--json"), longs.end());
  EXPECT_NE(std::find(longs.begin(), longs.end(), "--port"), longs.end());
  EXPECT_EQ(std::find(longs.begin(), longs.end(), "-p"), longs.end());
  EXPECT_EQ(std::find(longs.begin(), longs.end(), "--secret"), longs.end());
  EXPECT_EQ(complete({"rdmakit-sample", "--js"}), (Words{"--json", "--json-file"}));
  const auto shorts = complete({"rdmakit-sample", "-"});
  EXPECT_NE(std::find(shorts.begin(), shorts.end(), "-p"), shorts.end());
  EXPECT_NE(std::find(shorts.begin(), shorts.end(), "--all"), shorts.end());
}

TEST_F(BashRun, CompletesFixedValues) {
  EXPECT_EQ(complete({"rdmakit-sample", "--op", ""}), (Words{"send", "write", "read"}));
  EXPECT_EQ(complete({"rdmakit-sample", "-a", "--op", "w"}), (Words{"write"}));
  EXPECT_EQ(complete({"rdmakit-sample", "--log-level", "c"}), (Words{"critical"}));
  EXPECT_EQ(complete({"rdmakit-sample", "--mode", ""}), (Words{"fast", "slow"}));
  // bash's default COMP_WORDBREAKS cuts --op=w into "--op" "=" "w".
  EXPECT_EQ(complete({"rdmakit-sample", "--op", "=", "w"}), (Words{"write"}));
  EXPECT_EQ(complete({"rdmakit-sample", "--op", "="}), (Words{"send", "write", "read"}));
  // Without '=' in COMP_WORDBREAKS the option and value arrive as one word.
  EXPECT_EQ(complete({"rdmakit-sample", "--op=re"}), (Words{"--op=read"}));
}

TEST_F(BashRun, OffersNothingForValuesItCannotList) {
  EXPECT_TRUE(complete({"rdmakit-sample", "--port", ""}).empty());
  EXPECT_TRUE(complete({"rdmakit-sample", "-p", "7"}).empty());
  EXPECT_TRUE(complete({"rdmakit-sample", "--all", "=", ""}).empty());
}

TEST_F(BashRun, CompletesFileNames) {
  const auto dir = std::filesystem::temp_directory_path() / ("rdmakit-completion-dir-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "sub");
  std::ofstream(dir / "report.json") << "{}\n";
  const auto prefix = (dir / "re").string();
  EXPECT_EQ(complete({"rdmakit-sample", "--json-file", prefix}), (Words{(dir / "report.json").string()}));
  EXPECT_EQ(complete({"rdmakit-sample", "--replay", (dir / "").string()}), (Words{(dir / "sub").string()}));
  std::filesystem::remove_all(dir);
}

TEST(ToolRunnerCompletion, PrintsTheScriptBeforeParsingAnythingElse) {
  SampleTool tool;
  bool ran = false;
  std::vector<std::string> args = {"/usr/bin/rdmakit-sample", "--port", "0", "--bash-completion=rk-sample"};
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  testing::internal::CaptureStdout();
  const int rc = tool.runner.run(
      static_cast<int>(argv.size()), argv.data(), [&] { ran = true; }, [&](Report&) { ran = true; });
  const auto out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  EXPECT_FALSE(ran);
  EXPECT_NE(out.find("complete -F _rdmakit_complete_rk_sample rk-sample\n"), std::string::npos);
}

TEST(ToolRunnerCompletion, DefaultsToTheNameItWasStartedUnder) {
  SampleTool tool;
  std::vector<std::string> args = {"/usr/bin/rdmakit-sample", "--bash-completion"};
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  testing::internal::CaptureStdout();
  const int rc = tool.runner.run(
      static_cast<int>(argv.size()), argv.data(), [] {}, [](Report&) {});
  const auto out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("complete -F _rdmakit_complete_rdmakit_sample rdmakit-sample\n"), std::string::npos);
}

}  // namespace
}  // namespace rdmakit
