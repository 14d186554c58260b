#pragma once
// What this process may do and hold, as the kernel sees it: its effective capabilities and
// how much memory it may pin (what ibv_reg_mr counts against RLIMIT_MEMLOCK).

#include <cstdint>
#include <optional>

namespace rdmakit {

// Whether this process holds `capability` (CAP_IPC_LOCK, CAP_NET_ADMIN) in its effective set
// (/proc/self/status's CapEff).
bool has_capability(int capability);

// The bytes this process may pin: RLIMIT_MEMLOCK's soft limit; nullopt where nothing bounds
// it (the limit is infinite, or CAP_IPC_LOCK lets the kernel pin past it).
std::optional<std::uint64_t> pinnable_bytes();

}  // namespace rdmakit
