// Every verdict both diagnosers give over the fixtures, held to what a user may paste: a fix
// is a command for this host (it parses as shell, names no placeholder, and each program it
// runs is in Debian 12 or is ours); a named cause without one says what to do next.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/diag/connect_diagnosis.hpp"
#include "lib/diag/diagnosis.hpp"

namespace rdmakit::diag {
namespace {

namespace fs = std::filesystem;

// The programs a fix may run, and where each comes from on Debian 12.
const std::map<std::string, std::string> known_programs = {
    {"apt-get", "apt"},     {"chmod", "coreutils"}, {"echo", "bash builtin"},   {"ip", "iproute2"},
    {"mkdir", "coreutils"}, {"mknod", "coreutils"}, {"modprobe", "kmod"},       {"nft", "nftables"},
    {"rdma", "iproute2"},   {"sysctl", "procps"},   {"ulimit", "bash builtin"}, {"export", "bash builtin"},
};

// Words that stand for a name the tool should have filled in.
const std::regex placeholder(R"(<[^>]*[a-z][^>]*>|\b(NETDEV|GATEWAY|DEVICE|ADDRESS|PORT)\b)");

struct Named {
  std::string where;  // fixture, for the failure message
  std::string cause;
  ExitCode exit_code;
  std::string fix;
  std::string next;
};

std::vector<Named> every_verdict() {
  std::vector<Named> verdicts;
  for (const auto& entry : fs::directory_iterator(RDMAKIT_DIAG_FIXTURES)) {
    if (!entry.is_directory()) continue;
    auto replay = load_replay(entry.path());
    const auto v = diagnose(make_target(replay.address, 0, "tcp"), replay.inventory, replay.attempt, SiblingNames{});
    verdicts.push_back(
        {"diag/" + entry.path().filename().string(), std::string(v.cause.name()), v.exit_code, v.fix, v.next});
  }
  for (const auto& folder : {fs::path(RDMAKIT_CONNECT_FIXTURES), fs::path(RDMAKIT_CONNECT_FIXTURES) / "captured"}) {
    for (const auto& entry : fs::directory_iterator(folder)) {
      if (entry.path().extension() != ".json") continue;
      std::ifstream in(entry.path());
      auto document = nlohmann::json::parse(in);
      document.erase("origin");
      const auto v = diagnose_connect(connect_case_from_json(document));
      verdicts.push_back({"connect/" + fs::relative(entry.path(), RDMAKIT_CONNECT_FIXTURES).string(),
                          std::string(v.cause.name()), v.exit_code, v.fix, v.next});
    }
  }
  return verdicts;
}

// bash -n: the fix parses as one shell command line.
bool parses_as_shell(const std::string& command) {
  const auto script = fs::temp_directory_path() / ("rdmakit-fix-" + std::to_string(::getpid()) + ".sh");
  std::ofstream(script) << command << "\n";
  const int status = std::system(("bash -n " + script.string() + " 2>/dev/null").c_str());
  fs::remove(script);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The first word of each simple command: "a && b; c | d" runs a, b, c and d.
std::vector<std::string> programs_run(const std::string& command) {
  std::vector<std::string> programs;
  const std::regex separators(R"(&&|\|\||;|\|)");
  for (std::sregex_token_iterator part(command.begin(), command.end(), separators, -1), end; part != end; ++part) {
    std::istringstream words(part->str());
    std::string word;
    // Leading VAR=value assignments are the environment, not the program.
    while (words >> word && word.find('=') != std::string::npos && word.front() != '"') {
    }
    if (!word.empty()) programs.push_back(word);
  }
  return programs;
}

TEST(Remedies, EveryFixIsACommandForThisHost) {
  const auto verdicts = every_verdict();
  ASSERT_GT(verdicts.size(), 30u);
  std::set<std::string> causes;
  for (const auto& v : verdicts) {
    causes.insert(v.cause);
    if (v.exit_code == ExitCode::cause_found || v.exit_code == ExitCode::unexplained) {
      EXPECT_FALSE(v.fix.empty() && v.next.empty()) << v.where << " (" << v.cause << "): neither fix nor next";
    }
    if (v.fix.empty()) continue;
    EXPECT_TRUE(parses_as_shell(v.fix)) << v.where << ": the fix is not shell: " << v.fix;
    EXPECT_FALSE(std::regex_search(v.fix, placeholder)) << v.where << ": the fix holds a placeholder: " << v.fix;
    for (const auto& program : programs_run(v.fix)) {
      EXPECT_TRUE(known_programs.contains(program)) << v.where << ": '" << program << "' in " << v.fix;
    }
  }
  // The walk covers the causes users meet first, from both diagnosers.
  for (const char* cause : {"no_rdma_device", "netdev_without_rdma", "address_not_local", "no_route", "no_listener",
                            "wrong_port_space", "source_not_rdma", "neighbour_unresolved", "unknown"}) {
    EXPECT_TRUE(causes.contains(cause)) << cause << " is not among the fixtures' verdicts";
  }
}

TEST(Remedies, TheProgramsOfACommandLine) {
  EXPECT_EQ(programs_run("modprobe -a ib_uverbs rdma_rxe && rdma link add rxe_eth0 type rxe netdev eth0"),
            (std::vector<std::string>{"modprobe", "rdma"}));
  EXPECT_EQ(programs_run("IBV_SHOW_WARNINGS=1 ibv_devices"), (std::vector<std::string>{"ibv_devices"}));
}

}  // namespace
}  // namespace rdmakit::diag
