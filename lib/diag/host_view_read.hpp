#pragma once
// One host's view for diag-connect (lib/diag/connect_diagnosis.hpp), built from what this
// layer can read without an RDMA library: diag-bind's inventory, the procfs, sysfs and
// configfs files beside it, and nftables' JSON ruleset. The roots are parameters so that
// tests point them at fixture trees; lib/diag/host_view.hpp reads the live host with them.

#include <filesystem>

#include <nlohmann/json.hpp>

#include "lib/diag/connect_diagnosis.hpp"
#include "lib/diag/diagnosis.hpp"

namespace rdmakit::diag {

// Devices (with their ports, active MTUs from the user-space view, and GIDs) and netdevs
// (with their addresses) of an inventory. A device's netdev is the one it was created on
// (soft-RoCE's parent), else the netdev its GIDs belong to. Leaves host_name, the files
// read_net_files reads, the firewall, the listeners, the route and the neighbour alone.
HostView view_from(const Inventory& inventory);

// Fills, for the devices and netdevs already in `view`: rp_filter per netdev and for all
// (proc_root/sys/net/ipv4/conf/NAME/rp_filter), each netdev's MAC
// (sys_root/class/net/NAME/address), and each Ethernet port's rdma_cm default GID type
// (configfs_root/rdma_cm/DEVICE/ports/N/default_roce_mode; the kernel's "RoCE v2" when
// configfs holds no entry for the device). A file that exists but cannot be read leaves
// -1 or "".
void read_net_files(const std::filesystem::path& proc_root, const std::filesystem::path& sys_root,
                    const std::filesystem::path& configfs_root, HostView& view);

// The rules of an `nft -j list ruleset` document that can touch RoCE v2: those whose UDP
// (or transport-header) port matches admit 4791, directly, in an anonymous or named set or
// in a range, with their verdict and their text; and the base chains whose policy is drop.
// A document that is not nftables' JSON gives readable = false with the reason in error.
Firewall firewall_from_nft_json(const nlohmann::json& ruleset);

}  // namespace rdmakit::diag
