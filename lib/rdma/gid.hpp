#pragma once
// One populated entry of a port's GID table, whether read from sysfs (lib/diag) or queried
// with ibv_query_gid_ex (lib/rdma): the same facts in the same text, so a diagnosis and a
// tool that binds to a GID name an entry alike. And which entry to give the stacks that are
// told an index instead of an address (perftest -x, NCCL, UCX, Open MPI): rdma_cm takes the
// GID from the address, they take whatever index they are given, link-local or not.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rdmakit {

struct GidEntry {
  std::uint32_t index = 0;
  std::string gid;     // IPv6 text form ("::ffff:10.55.0.1")
  std::string type;    // "IB", "RoCE v1", "RoCE v2"
  std::string netdev;  // the netdev the entry belongs to, "" for IB
};

// "fe80::1%eth0" -> "fe80::1".
std::string strip_scope(const std::string& host);
// Canonical text of a numeric address so that "fd55:0::1" and "fd55::1" compare equal; the
// scope is dropped. Text that is not an address comes back without its scope.
std::string canonical(const std::string& host);
// The GID a RoCE port holds for an address: IPv4 as "::ffff:a.b.c.d", IPv6 as itself.
std::string gid_for_address(const std::string& numeric_host);

// fe80::/10. Every RoCE port has one made from its MAC; no router forwards it, so a stack
// given its index reaches only peers on the same link.
bool is_link_local(const GidEntry& entry);
// The IPv4 address of an IPv4-mapped GID ("10.55.0.1"), "" for any other.
std::string ipv4_of(const GidEntry& entry);
// The address an entry stands for: "10.55.0.1" for an IPv4-mapped GID, else the GID's
// canonical IPv6 text (without a scope).
std::string entry_address(const GidEntry& entry);

// One port's GID table, as a host model or a device query has it.
struct GidPort {
  std::string device;
  int port = 0;
  std::vector<GidEntry> gids;
};

// The entry an index-taking stack should be given for an address of this host: the one that
// holds the address itself, RoCE v2 before RoCE v1 (v2 is UDP/IP and crosses routers; v1 is an
// Ethernet frame that stays in its L2). No entry when no port holds the address.
struct GidAdvice {
  std::string address;  // canonical
  std::string device;
  int port = 0;
  std::optional<GidEntry> entry;
  std::string reason;  // why this entry, or why none
};
GidAdvice advise_gid(const std::vector<GidPort>& ports, const std::string& numeric_address);

// The setting each stack takes for an advice with an entry: {stack, setting}. Empty without one.
struct StackSetting {
  std::string stack;    // "perftest", "NCCL", "UCX", "Open MPI (UCX)", "Open MPI (openib)"
  std::string setting;  // "-d rxe0 -i 1 -x 3", "NCCL_IB_HCA=rxe0:1 NCCL_IB_GID_INDEX=3", ...
};
std::vector<StackSetting> stack_settings(const GidAdvice& advice);

// What is wrong with giving a stack `index` on `port` when it should reach the network as
// `advice` says: "" when the index is the advised one or an entry of the same type and family
// on the same netdev; else one clause naming what the index holds ("index 0 is link-local
// fe80::1 (RoCE v2)", "index 7 is empty", "index 2 is RoCE v1 ::ffff:10.55.0.1").
std::string index_problem(const GidPort& port, std::uint32_t index, const GidAdvice& advice);

// "3 ::ffff:10.55.0.1 RoCE v2 rxenet0": an entry as the messages name it.
std::string entry_text(const GidEntry& entry);

}  // namespace rdmakit
