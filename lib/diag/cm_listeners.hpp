#pragma once
// rdma_cm's listeners on this host, from RDMA netlink's per-device cm_id dumps: what
// diag-connect's host view shows, and how rdma_smoke knows that a server it started is
// listening. Netlink only: no libnftables, libcap or libcrypto behind it.

#include <linux/netlink.h>

#include <vector>

#include "lib/diag/connect_diagnosis.hpp"

namespace rdmakit::diag {

// The rdma_cm ids in LISTEN state on every RDMA device, into view.listeners. A listener on
// a wildcard address shows once per device (the kernel listens on each device for it); one
// bound to an address, on that address's device. False when a dump could not be read (no
// RDMA core, a device without a netlink index, an error).
bool read_cm_listeners(HostView& view);

// The listening cm_ids in one message of that dump.
std::vector<CmListener> listeners_in(const nlmsghdr& message);

}  // namespace rdmakit::diag
