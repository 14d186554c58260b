#pragma once
// One populated entry of a port's GID table, whether read from sysfs (lib/diag) or queried
// with ibv_query_gid_ex (lib/rdma): the same facts in the same text, so a diagnosis and a
// tool that binds to a GID name an entry alike.

#include <cstdint>
#include <string>

namespace rdmakit {

struct GidEntry {
  std::uint32_t index = 0;
  std::string gid;     // IPv6 text form ("::ffff:10.55.0.1")
  std::string type;    // "IB", "RoCE v1", "RoCE v2"
  std::string netdev;  // the netdev the entry belongs to, "" for IB
};

}  // namespace rdmakit
