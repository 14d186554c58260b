#pragma once
// Queries on the host model (lib/diag/diagnosis.hpp) that the verdicts and the reports
// share: which device, port or netdev serves what, and the words for bytes and errnos.
// Internal to lib/diag/.

#include <cstdint>
#include <string>
#include <vector>

#include "lib/diag/diagnosis.hpp"

namespace rdmakit::diag {

std::string strip_scope(const std::string& host);

std::string without_prefix(const std::string& address);

// Canonical text of a numeric address so that "fd55:0::1" and "fd55::1" compare equal.
std::string canonical(const std::string& host);

std::string human_bytes(std::uint64_t bytes);

std::string errno_text(int errnum);

// The user-space provider library libibverbs needs for a kernel driver.
std::string provider_for(const std::string& driver);

bool has_provider(const Inventory& inventory, const KernelDevice& device);

const UserDevice* user_view_of(const Inventory& inventory, const KernelDevice& device);

const KernelDevice* kernel_device(const Inventory& inventory, const std::string& name);

const KernelPort* kernel_port(const KernelDevice& device, int number);

const Netdev* netdev_named(const Inventory& inventory, const std::string& name);

struct PortRef {
  const KernelDevice* device;
  const KernelPort* port;
};

// Devices (and ports) holding a GID for the address, or created on its netdev.
std::vector<PortRef> ports_serving(const Inventory& inventory, const std::string& host, const std::string& netdev);

std::vector<std::string> rdma_netdevs(const Inventory& inventory);

// Addresses on netdevs that have an RDMA device: what the user could bind instead.
std::vector<std::string> rdma_addresses(const Inventory& inventory);

std::string join(const std::vector<std::string>& items, const std::string& separator = ", ");

std::string use_instead(const Inventory& inventory);

// The first up Ethernet netdev with an address: where a soft-RoCE device could go.
const Netdev* rxe_candidate(const Inventory& inventory);

std::string rxe_link_command(const std::string& netdev);

}  // namespace rdmakit::diag
