#include "lib/diag/privileges.hpp"

#include <grp.h>
#include <pwd.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <memory>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace rdmakit::diag {

namespace {

struct CapFree {
  void operator()(void* state) const { cap_free(state); }
};
using Capabilities = std::unique_ptr<std::remove_pointer_t<cap_t>, CapFree>;

[[noreturn]] void failed_call(const char* call) {
  throw std::system_error(errno, std::generic_category(), call);
}

Capabilities checked_caps(cap_t state, const char* call) {
  if (state == nullptr) failed_call(call);
  return Capabilities(state);
}

bool holds(cap_t state, cap_value_t capability, cap_flag_t flag) {
  cap_flag_value_t value = CAP_CLEAR;
  return cap_get_flag(state, capability, flag, &value) == 0 && value == CAP_SET;
}

std::string name_of(cap_value_t capability) {
  const std::unique_ptr<char, CapFree> text(cap_to_name(capability));
  return text ? std::string(text.get()) : fmt::format("cap_{}", capability);
}

bool kept_by(const std::vector<int>& keep, cap_value_t capability) {
  return std::ranges::find(keep, capability) != keep.end();
}

// Raising the hard limit needs CAP_SYS_RESOURCE, which goes with the rest: done first. Where
// it is not held (a container's root), the soft limit goes up to the hard one; false when
// that is still short of `bytes`.
bool raise_memlock(std::uint64_t bytes, PrivilegeDrop& drop) {
  rlimit limit{};
  if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0) failed_call("getrlimit RLIMIT_MEMLOCK");
  if (bytes == 0 || limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= bytes) return true;
  rlimit raised{.rlim_cur = bytes,
                .rlim_max = limit.rlim_max == RLIM_INFINITY ? RLIM_INFINITY : std::max<rlim_t>(limit.rlim_max, bytes)};
  if (setrlimit(RLIMIT_MEMLOCK, &raised) == 0) {
    drop.memlock = bytes;
    return true;
  }
  if (errno != EPERM) failed_call("setrlimit RLIMIT_MEMLOCK");
  raised = {.rlim_cur = limit.rlim_max, .rlim_max = limit.rlim_max};
  if (setrlimit(RLIMIT_MEMLOCK, &raised) != 0) failed_call("setrlimit RLIMIT_MEMLOCK");
  if (limit.rlim_max > limit.rlim_cur) drop.memlock = limit.rlim_max;
  return false;
}

// Clears the bounding set (CAP_SETPCAP needed) so that an exec could not regain the rest;
// true also where it holds nothing more already (a systemd unit's CapabilityBoundingSet).
bool clear_bounding_set(cap_t start, const std::vector<int>& keep) {
  const bool can_drop = holds(start, CAP_SETPCAP, CAP_EFFECTIVE);
  for (cap_value_t capability = 0; capability < cap_max_bits(); ++capability) {
    if (kept_by(keep, capability) || cap_get_bound(capability) != 1) continue;
    if (!can_drop) return false;
    if (cap_drop_bound(capability) != 0) failed_call("cap_drop_bound");
  }
  return true;
}

// setuid from root clears the effective set and, without PR_SET_KEEPCAPS, the permitted one
// too: kept across it here, and trimmed to what is kept right after (cap_set_proc below).
void become(const RunAs& user) {
  if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) failed_call("prctl PR_SET_KEEPCAPS");
  const gid_t group = user.gid;
  if (setgroups(1, &group) != 0) failed_call("setgroups");
  if (setresgid(user.gid, user.gid, user.gid) != 0) failed_call("setresgid");
  if (setresuid(user.uid, user.uid, user.uid) != 0) failed_call("setresuid");
  if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) != 0) failed_call("prctl PR_SET_KEEPCAPS");
}

}  // namespace

std::optional<RunAs> find_user(const std::string& name) {
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (getpwnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) {
    return std::nullopt;
  }
  return RunAs{.name = name, .uid = found->pw_uid, .gid = found->pw_gid};
}

PrivilegeDrop drop_privileges(const PrivilegeNeeds& needs) {
  PrivilegeDrop drop;
  const auto start = checked_caps(cap_get_proc(), "cap_get_proc");
  const auto bits = cap_max_bits();
  std::size_t permitted = 0;
  for (cap_value_t capability = 0; capability < bits; ++capability) {
    if (holds(start.get(), capability, CAP_PERMITTED)) ++permitted;
  }
  if (permitted == 0) return drop;
  drop.had_capabilities = true;

  auto keep = needs.keep;
  // Without the limit, registering the memory needs CAP_IPC_LOCK: kept where it is held.
  if (!raise_memlock(needs.memlock_bytes, drop) && holds(start.get(), CAP_IPC_LOCK, CAP_PERMITTED) &&
      !kept_by(keep, CAP_IPC_LOCK)) {
    keep.push_back(CAP_IPC_LOCK);
    drop.ipc_lock_for_memlock = true;
  }
  drop.bounding_cleared = clear_bounding_set(start.get(), keep);
  // Not supported by the kernel (before 4.3) is nothing to clear.
  if (CAP_AMBIENT_SUPPORTED() && cap_reset_ambient() != 0) failed_call("cap_reset_ambient");
  if (needs.run_as && needs.run_as->uid != 0 && geteuid() == 0) {
    become(*needs.run_as);
    drop.became = needs.run_as;
  }

  const auto kept = checked_caps(cap_init(), "cap_init");  // all three sets empty
  for (const int capability : keep) {
    if (!holds(start.get(), capability, CAP_PERMITTED)) {
      drop.not_held.push_back(name_of(capability));
      continue;
    }
    const std::array<cap_value_t, 1> one{capability};
    if (cap_set_flag(kept.get(), CAP_PERMITTED, 1, one.data(), CAP_SET) != 0 ||
        cap_set_flag(kept.get(), CAP_EFFECTIVE, 1, one.data(), CAP_SET) != 0) {
      failed_call("cap_set_flag");
    }
    drop.kept.push_back(name_of(capability));
  }
  if (cap_set_proc(kept.get()) != 0) failed_call("cap_set_proc");
  drop.dropped = permitted - drop.kept.size();
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) failed_call("prctl PR_SET_NO_NEW_PRIVS");
  return drop;
}

std::string describe(const PrivilegeDrop& drop) {
  if (!drop.had_capabilities) return "started without capabilities: nothing to drop";
  auto line =
      fmt::format("capabilities: kept {}, dropped {} others",
                  drop.kept.empty() ? std::string("none") : fmt::format("{}", fmt::join(drop.kept, " ")), drop.dropped);
  if (!drop.not_held.empty()) line += fmt::format(" ({} not held at start)", fmt::join(drop.not_held, " "));
  line += drop.bounding_cleared ? "; bounding set cleared" : "; bounding set left as it was (no cap_setpcap)";
  line += "; no_new_privs set";
  if (drop.became)
    line += fmt::format("; running as user {} (uid {}, gid {})", drop.became->name, drop.became->uid, drop.became->gid);
  if (drop.memlock) line += fmt::format("; RLIMIT_MEMLOCK raised to {} KiB", *drop.memlock / 1024);
  if (drop.ipc_lock_for_memlock) line += "; cap_ipc_lock kept: no cap_sys_resource to raise RLIMIT_MEMLOCK enough";
  return line;
}

}  // namespace rdmakit::diag
