#pragma once
// An RDMA port's counters as sysfs shows them (hw_counters: the driver's, such as rxe's
// retries and sequence errors; counters: the IB standard ones where the driver has them),
// and their change over a measurement. No RDMA library: files only, so the unit tests read
// a fixture tree.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

namespace rdmakit {

using PortCounters = std::map<std::string, std::uint64_t>;
using CounterDeltas = std::map<std::string, std::int64_t>;

inline constexpr const char* sysfs_infiniband = "/sys/class/infiniband";

// Every readable counter of DEVICE's port PORT under ROOT; empty when the driver has none.
// A name in both folders is the hw_counters one. The counters are the port's: another
// process's traffic on it counts too.
PortCounters read_port_counters(const std::string& device, unsigned port,
                                const std::filesystem::path& root = sysfs_infiniband);

// How long the kernel keeps the hw_counters it read before it reads them again
// (hw_counters/lifespan, in ms; 0 when there is none): a second read sooner gives the same
// values.
std::chrono::milliseconds counters_lifespan(const std::string& device, unsigned port,
                                            const std::filesystem::path& root = sysfs_infiniband);

// after - before for every counter in both (negative where a counter was reset meanwhile).
// The IB standard data counters, port_xmit_data and port_rcv_data, count 4-byte words (the
// IB spec's PortXmitData is octets divided by 4): each comes with its bytes beside it,
// port_xmit_bytes and port_rcv_bytes.
CounterDeltas counter_deltas(const PortCounters& before, const PortCounters& after);

// A look at DEVICE's port PORT: true when its counters moved since the look before (the
// first: since this was called). An empty function when the driver shows no counters. What
// says a peer whose work a server cannot see (one-sided WRITE and READ) is still at it.
std::function<bool()> counters_moved(const std::string& device, unsigned port);

}  // namespace rdmakit
