#pragma once
// The causes each diagnoser's verdict may name: one table each, the stable codes of
// verdict.cause that scripts match on. A verdict is made from a Cause, which a string
// literal converts to only when the table lists it (at compile time), so that a new or
// misspelt cause cannot reach a report unlisted; the man pages' CAUSES sections and the
// report schemas are tested against these tables (tests/unit/causes_test.cpp).

#include <algorithm>
#include <array>
#include <optional>
#include <string_view>

namespace rdmakit::diag {

// diag-bind's, in man/diag-bind.1's order.
inline constexpr std::array<std::string_view, 22> bind_causes = {"ok",
                                                                 "several_devices",
                                                                 "wildcard_address",
                                                                 "no_rdma_device",
                                                                 "netdev_without_rdma",
                                                                 "address_not_local",
                                                                 "no_route",
                                                                 "loopback_address",
                                                                 "gid_link_local",
                                                                 "gid_missing",
                                                                 "provider_missing",
                                                                 "uverbs_unavailable",
                                                                 "userspace_mismatch",
                                                                 "rdma_cm_missing",
                                                                 "rdma_cm_permission",
                                                                 "netdev_down",
                                                                 "port_not_active",
                                                                 "no_subnet_manager",
                                                                 "pkey_mismatch",
                                                                 "no_path_record",
                                                                 "memlock_too_low",
                                                                 "unknown"};

// diag-connect's: its own, and diag-bind's that stop RDMA on the client (connect_host_causes).
inline constexpr std::array<std::string_view, 30> connect_causes = {"ok",
                                                                    "no_rdma_device",
                                                                    "provider_missing",
                                                                    "uverbs_unavailable",
                                                                    "userspace_mismatch",
                                                                    "rdma_cm_missing",
                                                                    "rdma_cm_permission",
                                                                    "loopback_address",
                                                                    "netdev_without_rdma",
                                                                    "gid_missing",
                                                                    "source_not_rdma",
                                                                    "no_route",
                                                                    "neighbour_unresolved",
                                                                    "neighbour_wrong",
                                                                    "wrong_port_space",
                                                                    "no_listener",
                                                                    "rejected_by_application",
                                                                    "peer_not_rdma",
                                                                    "peer_port_down",
                                                                    "no_subnet_manager",
                                                                    "pkey_mismatch",
                                                                    "no_path_record",
                                                                    "firewall_roce",
                                                                    "rp_filter",
                                                                    "gid_link_local",
                                                                    "gid_index_mismatch",
                                                                    "roce_mode_mismatch",
                                                                    "mtu_mismatch",
                                                                    "no_rdma_answer",
                                                                    "unknown"};

// diag-bind's causes that are the client host's alone: no connection can work until they are
// fixed, whatever the route or the server, so diag-connect gives them as its verdict.
// gid_link_local and gid_missing: the local port has no GID the path can use, so the kernel
// refuses the resolve before anything reaches the peer.
inline constexpr std::array<std::string_view, 13> connect_host_causes = {
    "no_rdma_device",     "provider_missing", "uverbs_unavailable",  "userspace_mismatch", "rdma_cm_missing",
    "rdma_cm_permission", "loopback_address", "netdev_without_rdma", "gid_link_local",     "gid_missing",
    "no_subnet_manager",  "pkey_mismatch",    "no_path_record"};

template <const auto& table>
constexpr bool listed_in(std::string_view name) {
  return std::ranges::find(table, name) != table.end();
}

static_assert(std::ranges::all_of(connect_host_causes, [](std::string_view c) { return listed_in<bind_causes>(c); }));
static_assert(std::ranges::all_of(connect_host_causes,
                                  [](std::string_view c) { return listed_in<connect_causes>(c); }));

// A cause of `table`: from a string literal the table lists (anything else does not compile),
// or found at run time (named).
template <const auto& table>
class Cause {
 public:
  // Implicit, so that `verdict("no_route", ...)` reads as the report does.
  consteval Cause(const char* name) : name_(name) {
    if (!listed_in<table>(name_)) throw "not a cause in this diagnoser's table (lib/diag/causes.hpp)";
  }
  // The table's entry for `name`; nothing when it lists none.
  static std::optional<Cause> named(std::string_view name) {
    const auto* const entry = std::ranges::find(table, name);
    if (entry == table.end()) return std::nullopt;
    return Cause(*entry, Listed{});
  }
  std::string_view name() const { return name_; }
  // Against another cause, or a literal the table lists (checked at compile time).
  bool operator==(const Cause&) const = default;

 private:
  struct Listed {};
  constexpr Cause(std::string_view name, Listed /*only named() makes one*/) : name_(name) {}
  std::string_view name_;
};

using BindCause = Cause<bind_causes>;
using ConnectCause = Cause<connect_causes>;

}  // namespace rdmakit::diag
