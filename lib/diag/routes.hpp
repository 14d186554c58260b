#pragma once
// The kernel's route to an address and its neighbour entry, over rtnetlink: what diag-bind
// asks of a destination's way out, and both of diag-connect's sides of theirs. Its own file,
// apart from the rest of the host's view (lib/diag/host_view), so that what asks a route
// needs neither libnftables nor the agent.

#include <string>

#include "lib/diag/connect_diagnosis.hpp"

namespace rdmakit::diag {

// What `ip route get DESTINATION [from SOURCE]` answers, for numeric IPv4 or IPv6
// addresses; SOURCE "" lets the kernel choose. No route: netdev "" and the errno (a
// destination that is not numeric: EINVAL).
RouteInfo route_to(const std::string& destination, const std::string& source);

// The kernel's neighbour entry for a numeric address on `netdev` ("" for any netdev);
// state "none" when there is none.
Neighbour neighbour_of(const std::string& address, const std::string& netdev);

}  // namespace rdmakit::diag
