#pragma once
// send_bw -x: rdma_cm binds to the address of the GID entry the index names, so a link-local
// entry (every RoCE port has one) binds fe80::...%netdev and runs between two hosts on one
// link, and nowhere else. Whether an index is one to warn about, and which entry to name
// instead. Pure: the port's table comes from lib/rdma (query_gid_port).

#include <cstdint>
#include <optional>
#include <string>

#include "lib/rdma/gid.hpp"

namespace rdmakit {

// The entry to name instead of `index`: a RoCE v2 entry of `port` that is not link-local, on
// the netdev of `index`'s entry (any netdev when the index is empty). Among those, the one of
// the same address as `index`'s entry (its RoCE v2 twin), else one of the family of `peer` (a
// numeric address, "" or a name for no preference), else the lowest index.
std::optional<GidEntry> routable_gid(const GidPort& port, std::uint32_t index, const std::string& peer);

// "-x 1 (::ffff:10.55.0.1 RoCE v2) is this host's routable entry on rxenet0", or, without
// one, that the port has none there.
std::string routable_gid_advice(const GidPort& port, std::uint32_t index, const std::string& peer);

// The warning for -x `index`: its entry is link-local, or RoCE v1 where the netdev has a
// routable RoCE v2 entry ("-x 0: index 0 is link-local fe80::1 (RoCE v2), which no router
// forwards; -x 1 (::ffff:10.55.0.1 RoCE v2) is this host's routable entry on rxenet0"). None
// for any other entry, for an IB port's (fe80 is its normal subnet prefix), and for an empty
// index: that one is the query's error, which routable_gid_advice completes.
std::optional<std::string> gid_index_warning(const GidPort& port, std::uint32_t index, const std::string& peer);

}  // namespace rdmakit
