// drop_privileges in a child process (what it does cannot be undone), checked from
// /proc/self/status. As root (CI's containers, the guest) it keeps CAP_NET_ADMIN only; as an
// ordinary user it does nothing. Both hold wherever the test runs.

#include <gtest/gtest.h>

#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lib/diag/privileges.hpp"

namespace rdmakit::diag {
namespace {

// CapPrm, CapEff, CapBnd, CapInh, CapAmb as masks; NoNewPrivs as 0 or 1.
std::map<std::string, std::uint64_t> status_fields() {
  std::map<std::string, std::uint64_t> fields;
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    const auto name = line.substr(0, colon);
    if (name.starts_with("Cap")) fields[name] = std::stoull(line.substr(colon + 1), nullptr, 16);
    if (name == "NoNewPrivs") fields[name] = std::stoull(line.substr(colon + 1));
  }
  return fields;
}

// Runs `check` in a child; what it returns ("" when all is well) comes back through a pipe.
std::string in_child(const std::function<std::string()>& check) {
  std::array<int, 2> pipe_fds{};
  if (pipe(pipe_fds.data()) != 0) return "pipe failed";
  const pid_t child = fork();
  if (child == 0) {
    std::string said;
    try {
      said = check();
    } catch (const std::exception& thrown) {
      said = std::string("threw: ") + thrown.what();
    }
    const auto wrote = write(pipe_fds[1], said.data(), said.size());
    _exit(wrote == static_cast<ssize_t>(said.size()) ? 0 : 1);
  }
  close(pipe_fds[1]);
  std::string said;
  std::array<char, 512> chunk{};
  for (ssize_t got = 0; (got = read(pipe_fds[0], chunk.data(), chunk.size())) > 0;) said.append(chunk.data(), got);
  close(pipe_fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) said += " (the child did not end well)";
  return said;
}

constexpr std::uint64_t net_admin = std::uint64_t{1} << CAP_NET_ADMIN;
constexpr std::uint64_t setpcap = std::uint64_t{1} << CAP_SETPCAP;
constexpr std::uint64_t sys_resource = std::uint64_t{1} << CAP_SYS_RESOURCE;
constexpr std::uint64_t ipc_lock = std::uint64_t{1} << CAP_IPC_LOCK;

TEST(Privileges, KeepsOnlyWhatItIsToldOrDoesNothingWithoutCapabilities) {
  const auto said = in_child([] {
    const auto before = status_fields();
    rlimit memlock{};
    getrlimit(RLIMIT_MEMLOCK, &memlock);
    const std::uint64_t more = memlock.rlim_cur == RLIM_INFINITY ? 0 : memlock.rlim_cur + (1024UL * 1024);
    const auto drop = drop_privileges({.keep = {CAP_NET_ADMIN}, .memlock_bytes = more, .run_as = {}});
    const auto after = status_fields();
    if (before.at("CapPrm") == 0) {
      if (drop.had_capabilities || after != before) return std::string("changed a process without capabilities");
      return std::string();
    }
    // Without cap_sys_resource the limit stays at the hard one and cap_ipc_lock is kept.
    const bool can_raise = (before.at("CapEff") & sys_resource) != 0 || more <= memlock.rlim_max;
    const auto kept = before.at("CapPrm") & (can_raise || more == 0 ? net_admin : net_admin | ipc_lock);
    std::string wrong;
    if (!drop.had_capabilities) wrong += "missed the capabilities held; ";
    if (after.at("CapPrm") != kept || after.at("CapEff") != kept) wrong += "permitted/effective not just net_admin; ";
    if (after.at("CapInh") != 0 || after.at("CapAmb") != 0) wrong += "inheritable/ambient left; ";
    if ((before.at("CapEff") & setpcap) != 0 && after.at("CapBnd") != (before.at("CapBnd") & kept)) {
      wrong += "bounding set not cleared; ";
    }
    if (after.at("NoNewPrivs") != 1) wrong += "no_new_privs not set; ";
    getrlimit(RLIMIT_MEMLOCK, &memlock);
    if (more != 0 && memlock.rlim_cur != (can_raise ? more : memlock.rlim_max)) wrong += "RLIMIT_MEMLOCK not raised; ";
    if (drop.dropped + drop.kept.size() != static_cast<std::size_t>(__builtin_popcountll(before.at("CapPrm")))) {
      wrong += "dropped and kept do not add up; ";
    }
    return wrong;
  });
  EXPECT_EQ(said, "");
}

TEST(Privileges, ASecondDropFindsNothingToDo) {
  const auto said = in_child([] {
    drop_privileges({.keep = {}, .memlock_bytes = 0, .run_as = {}});
    const auto before = status_fields();
    const auto drop = drop_privileges({.keep = {CAP_NET_ADMIN}, .memlock_bytes = 0, .run_as = {}});
    if (drop.had_capabilities || status_fields() != before) return std::string("the second drop did something");
    return describe(drop) == "started without capabilities: nothing to drop" ? std::string() : describe(drop);
  });
  EXPECT_EQ(said, "");
}

// Under a systemd unit the agent starts with CAP_NET_ADMIN alone, ambient, and a bounding set
// of just that: nothing to clear, and no CAP_SETPCAP to clear it with. Made here by a first drop.
TEST(Privileges, ABoundingSetAlreadyLimitedCountsAsCleared) {
  const auto said = in_child([] {
    const auto first = drop_privileges({.keep = {CAP_NET_ADMIN}, .memlock_bytes = 0, .run_as = {}});
    if (!first.bounding_cleared || first.kept.empty()) return std::string();  // not root with both
    const auto second = drop_privileges({.keep = {CAP_NET_ADMIN}, .memlock_bytes = 0, .run_as = {}});
    return second.had_capabilities && second.bounding_cleared && second.dropped == 0 &&
                   second.kept == std::vector<std::string>{"cap_net_admin"}
               ? std::string()
               : describe(second);
  });
  EXPECT_EQ(said, "");
}

// Started as root: the user it is told to become, for good (real, effective and saved ids,
// no supplementary groups but its own), with the capabilities it keeps still effective.
TEST(Privileges, BecomesTheUserKeepingTheCapabilities) {
  const auto said = in_child([] {
    const auto nobody = find_user("nobody");
    if (geteuid() != 0 || !nobody || (status_fields().at("CapEff") & net_admin) == 0) return std::string();
    const auto drop = drop_privileges({.keep = {CAP_NET_ADMIN}, .memlock_bytes = 0, .run_as = nobody});
    std::string wrong;
    uid_t real = 0;
    uid_t effective = 0;
    uid_t saved = 0;
    getresuid(&real, &effective, &saved);
    if (real != nobody->uid || effective != nobody->uid || saved != nobody->uid) wrong += "uids not all nobody's; ";
    gid_t group_real = 0;
    gid_t group_effective = 0;
    gid_t group_saved = 0;
    getresgid(&group_real, &group_effective, &group_saved);
    if (group_real != nobody->gid || group_effective != nobody->gid || group_saved != nobody->gid) {
      wrong += "gids not all nobody's; ";
    }
    std::vector<gid_t> groups(64);
    const int count = getgroups(static_cast<int>(groups.size()), groups.data());
    if (count != 1 || groups[0] != nobody->gid) wrong += "supplementary groups left; ";
    const auto after = status_fields();
    if (after.at("CapEff") != net_admin || after.at("CapPrm") != net_admin) wrong += "net_admin not kept alone; ";
    if (setuid(0) == 0) wrong += "could become root again; ";
    if (!drop.became || drop.became->name != "nobody") wrong += "did not say whom it became; ";
    if (describe(drop).find("; running as user nobody (uid ") == std::string::npos) wrong += describe(drop);
    return wrong;
  });
  EXPECT_EQ(said, "");
  EXPECT_EQ(find_user("no-such-user-rdmakit"), std::nullopt);
}

TEST(Privileges, DescribeSaysWhatWasKept) {
  PrivilegeDrop drop{.had_capabilities = true,
                     .kept = {"cap_net_admin"},
                     .not_held = {},
                     .dropped = 40,
                     .bounding_cleared = true,
                     .memlock = 13 * 1024 * 1024,
                     .ipc_lock_for_memlock = false,
                     .became = {}};
  EXPECT_EQ(describe(drop),
            "capabilities: kept cap_net_admin, dropped 40 others; bounding set cleared; no_new_privs set; "
            "RLIMIT_MEMLOCK raised to 13312 KiB");
  drop.kept.clear();
  drop.not_held = {"cap_net_admin"};
  drop.bounding_cleared = false;
  drop.memlock.reset();
  EXPECT_EQ(describe(drop),
            "capabilities: kept none, dropped 40 others (cap_net_admin not held at start); bounding set left as it "
            "was (no cap_setpcap); no_new_privs set");
}

}  // namespace
}  // namespace rdmakit::diag
