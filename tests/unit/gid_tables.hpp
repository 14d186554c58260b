#pragma once
// GID tables the GID tests share: the guest's rxe0 and a ConnectX-style port.

#include "lib/rdma/gid.hpp"

namespace rdmakit::test {

// rxe0 in the guest (scripts/rxe-vm.sh), with a VLAN rxenet0.100 added: rxe makes only RoCE v2
// entries.
inline GidPort guest_rxe0() {
  return {.device = "rxe0",
          .port = 1,
          .gids = {{0, "fe80::6cc4:c4ff:fe8d:1ad5", "RoCE v2", "rxenet0"},
                   {1, "::ffff:10.55.0.1", "RoCE v2", "rxenet0"},
                   {2, "::ffff:10.55.0.2", "RoCE v2", "rxenet0"},
                   {3, "fd55::1", "RoCE v2", "rxenet0"},
                   {5, "::ffff:10.66.0.1", "RoCE v2", "rxenet0.100"}}};
}

// A ConnectX-style table: every address twice, RoCE v1 first; 192.168.1.6 has RoCE v1 only.
inline GidPort dual_mlx5() {
  return {.device = "mlx5_0",
          .port = 1,
          .gids = {{0, "fe80::1", "RoCE v1", "ens1"},
                   {1, "fe80::1", "RoCE v2", "ens1"},
                   {2, "::ffff:192.168.1.5", "RoCE v1", "ens1"},
                   {3, "::ffff:192.168.1.5", "RoCE v2", "ens1"},
                   {4, "::ffff:192.168.1.6", "RoCE v1", "ens1"}}};
}

}  // namespace rdmakit::test
