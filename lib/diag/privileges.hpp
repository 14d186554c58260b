#pragma once
// Least privilege for a service started as root (the diag-connect agent): before its listeners
// open it becomes an unprivileged user, keeps the few capabilities it needs and gives up the
// rest for good. A process started without capabilities (an ordinary user) is left exactly as
// it is.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rdmakit::diag {

// A user to run as: its name, uid and primary group.
struct RunAs {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
};

// The user `name` from the passwd database; nullopt when there is none.
std::optional<RunAs> find_user(const std::string& name);

struct PrivilegeNeeds {
  std::vector<int> keep;  // capability numbers (<linux/capability.h>: CAP_NET_ADMIN ...)
  // Memory the service registers with the NIC. Without CAP_IPC_LOCK the kernel pins no more
  // than RLIMIT_MEMLOCK, so the limit is raised to this (soft and hard) while root may.
  std::uint64_t memlock_bytes = 0;
  // Started as root (uid 0): the user to become, its groups no more than its primary one.
  // Without it, or as uid 0, the process stays root's (with the capabilities above only).
  std::optional<RunAs> run_as;
};

struct PrivilegeDrop {
  bool had_capabilities = false;         // false: nothing was held, nothing was done
  std::vector<std::string> kept;         // names, "cap_net_admin"
  std::vector<std::string> not_held;     // asked to keep but not held at the start
  std::size_t dropped = 0;               // permitted capabilities given up
  bool bounding_cleared = false;         // holds no more than kept; false: no CAP_SETPCAP to clear it
  std::optional<std::uint64_t> memlock;  // RLIMIT_MEMLOCK raised to this
  bool ipc_lock_for_memlock = false;     // the limit could not be raised: CAP_IPC_LOCK kept instead
  std::optional<RunAs> became;           // the user it runs as now, where it changed
};

// Where the process holds any capability: raises RLIMIT_MEMLOCK to needs.memlock_bytes where
// it is lower (where it cannot, CAP_IPC_LOCK is kept in its place, if held); drops every
// capability but needs.keep from the bounding set (where CAP_SETPCAP allows), the ambient and
// inheritable sets; becomes needs.run_as (uid, gid and groups, real, effective and saved, so
// there is no way back to root) keeping the capabilities across the change; then leaves the
// permitted and effective sets at needs.keep and sets no_new_privs, so that
// nothing this process runs can gain more. Capabilities belong to a thread: call it before
// any other thread starts, and before opening /dev/infiniband/rdma_cm or a uverbs device:
// those refuse commands written with credentials other than the opener's (the kernel's
// ib_safe_file_access), and a capability change makes new credentials. Throws
// std::system_error when a step that must work fails.
PrivilegeDrop drop_privileges(const PrivilegeNeeds& needs);

// One line for the start log: what was kept and given up.
std::string describe(const PrivilegeDrop& drop);

}  // namespace rdmakit::diag
