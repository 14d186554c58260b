#pragma once
// What rdma_mesh's rank tells the others about itself: the address it chose (or was given),
// the device and port behind it, and, when it cannot take part, the bind diagnosis's verdict.

#include <string>

#include "lib/diag/host_probe.hpp"
#include "lib/mesh/mesh_node.hpp"

namespace rdmakit::diag {

// `bind` wins, then `netdev`, then `device` (lib/diag/address_choice.hpp). The address is
// tried as the tools would bind it; a failure is diagnosed, never thrown.
mesh::Node describe_local_node(const std::string& bind, const std::string& netdev, const std::string& device,
                               const ProbeOptions& options);

}  // namespace rdmakit::diag
