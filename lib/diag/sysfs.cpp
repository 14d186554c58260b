#include "lib/diag/sysfs.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "lib/diag/host_queries.hpp"

namespace rdmakit::diag {

namespace fs = std::filesystem;

namespace {

std::string read_or_empty(const fs::path& file) {
  return read_first_line(file).value_or("");
}

std::vector<std::string> sorted_entries(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    names.push_back(entry.path().filename().string());
  }
  // Port and GID indices in numeric order, before any other names, which are in name order.
  // Compared as digit strings: a strict weak order (std::sort needs one) that no name, however
  // long, makes throw.
  const auto number = [](const std::string& name) -> std::optional<std::string_view> {
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return std::nullopt;
    }
    return std::string_view(name).substr(std::min(name.find_first_not_of('0'), name.size()));
  };
  std::sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    const auto x = number(a);
    const auto y = number(b);
    if (x && y) return x->size() != y->size() ? x->size() < y->size() : *x < *y;
    if (x || y) return x.has_value();
    return a < b;
  });
  return names;
}

// "4: ACTIVE" -> {4, "ACTIVE"}
std::pair<int, std::string> split_state(const std::string& text) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) {
    return {0, text};
  }
  int code = 0;
  try {
    code = std::stoi(text.substr(0, colon));
  } catch (const std::exception&) {
    code = 0;  // the state's name alone is still worth reporting
  }
  auto name = text.substr(colon + 1);
  name.erase(0, name.find_first_not_of(' '));
  return {code, name};
}

// A number as sysfs prints LIDs and P_Keys ("0x1a", "0xffff"); -1 when the file is absent or
// holds something else.
int read_hex(const fs::path& file) {
  auto text = read_or_empty(file);
  if (text.starts_with("0x")) text.erase(0, 2);
  int value = -1;
  const auto* const end = text.data() + text.size();
  const auto [stop, ec] = std::from_chars(text.data(), end, value, 16);
  return ec == std::errc{} && stop == end && value <= 0xffff ? value : -1;
}

bool is_zero_gid(const std::string& gid) {
  return std::all_of(gid.begin(), gid.end(), [](char c) { return c == '0' || c == ':'; });
}

// `rnic`: the device's node type is 4 (an iWARP RNIC), whose one GID, the port's MAC, the
// kernel types "IB/RoCE v1" like any other.
KernelPort read_port(const fs::path& dir, int number, bool rnic) {
  KernelPort port;
  port.number = number;
  std::tie(port.state_code, port.state) = split_state(read_or_empty(dir / "state"));
  std::tie(port.phys_state_code, port.phys_state) = split_state(read_or_empty(dir / "phys_state"));
  port.link_layer = read_or_empty(dir / "link_layer");
  port.rate = read_or_empty(dir / "rate");
  for (const auto& name : sorted_entries(dir / "gids")) {
    const auto raw = read_first_line(dir / "gids" / name);
    if (!raw || is_zero_gid(*raw)) {
      continue;
    }
    GidEntry entry;
    entry.index = static_cast<std::uint32_t>(std::stoul(name));
    entry.gid = gid_text(*raw);
    entry.type = read_or_empty(dir / "gid_attrs" / "types" / name);
    // The kernel names IB and RoCE v1 alike; a port of neither link layer (EFA's
    // "Unspecified") has plain GIDs.
    if (entry.type == "IB/RoCE v1" || entry.type.empty()) {
      entry.type = rnic                              ? "iWARP"
                   : port.link_layer == "InfiniBand" ? "IB"
                   : port.link_layer == "Ethernet"   ? "RoCE v1"
                                                     : "GID";
    }
    entry.netdev = read_or_empty(dir / "gid_attrs" / "ndevs" / name);
    port.gids.push_back(std::move(entry));
  }
  if (port.link_layer == "InfiniBand") {
    port.lid = read_hex(dir / "lid");
    port.sm_lid = read_hex(dir / "sm_lid");
    for (const auto& name : sorted_entries(dir / "pkeys")) {
      const auto pkey = read_hex(dir / "pkeys" / name);
      if (pkey > 0) port.pkeys.push_back(static_cast<std::uint16_t>(pkey));
    }
  }
  return port;
}

std::string driver_of(const fs::path& device_dir) {
  std::error_code ec;
  const auto target = fs::read_symlink(device_dir / "device" / "driver", ec);
  if (!ec) {
    return target.filename().string();
  }
  // Soft-RoCE devices have no bus device; they name the netdev they sit on in `parent`.
  // siw is the one that is an iWARP RNIC (node type 4), whatever it was named.
  if (fs::exists(device_dir / "parent", ec)) {
    return read_or_empty(device_dir / "node_type").starts_with("4") ? "siw" : "rdma_rxe";
  }
  return {};
}

// The bus device a class device hangs on: the last part of its `device` link
// ("../../../0000:3b:00.0"). A NIC's netdev and its RDMA device share it.
std::string bus_device_of(const fs::path& class_dir) {
  std::error_code ec;
  const auto target = fs::read_symlink(class_dir / "device", ec);
  return ec ? std::string() : target.filename().string();
}

std::string netdev_type(const std::string& arphrd) {
  if (arphrd == "1") return "ether";
  if (arphrd == "32") return "infiniband";
  if (arphrd == "772") return "loopback";
  return arphrd;
}

// Each IB port's GIDs name the IPoIB netdev whose hardware address holds one of them, as a
// RoCE port's name their netdev: rdma_cm binds an IPoIB address to that port. The first
// netdev in name order takes it: ib0 before its P_Key children (ib0.8001).
void link_ipoib_netdevs(Inventory& inventory) {
  for (const auto& netdev : inventory.netdevs) {
    if (netdev.ipoib_gid.empty()) continue;
    for (auto& device : inventory.kernel_devices) {
      for (auto& port : device.ports) {
        if (port.link_layer != "InfiniBand") continue;
        for (auto& entry : port.gids) {
          if (entry.gid == netdev.ipoib_gid && entry.netdev.empty()) entry.netdev = netdev.name;
        }
      }
    }
  }
}

constexpr const char* rdma_modules[] = {"ib_core", "ib_uverbs", "ib_cm",    "iw_cm",   "rdma_cm", "rdma_ucm",
                                        "ib_umad", "rdma_rxe",  "siw",      "mlx5_ib", "mlx4_ib", "irdma",
                                        "bnxt_re", "efa",       "iw_cxgb4", "qedr",    "hfi1",    "ib_ipoib"};

}  // namespace

void read_sysfs(const fs::path& root, Inventory& inventory) {
  const auto class_dir = root / "class" / "infiniband";
  std::error_code ec;
  // An empty class directory still means the core is loaded; fixtures (git keeps no empty
  // directories) show it through module/ib_core instead.
  inventory.rdma_core_present = fs::is_directory(class_dir, ec) || fs::is_directory(root / "module" / "ib_core", ec);
  for (const auto& name : sorted_entries(class_dir)) {
    const auto dir = class_dir / name;
    KernelDevice device;
    device.name = name;
    device.node_guid = read_or_empty(dir / "node_guid");
    device.node_type = read_or_empty(dir / "node_type");
    device.parent_netdev = read_or_empty(dir / "parent");
    device.driver = driver_of(dir);
    device.bus_device = bus_device_of(dir);
    for (const auto& port : sorted_entries(dir / "ports")) {
      try {
        device.ports.push_back(read_port(dir / "ports" / port, std::stoi(port), device.node_type.starts_with("4")));
      } catch (const std::exception&) {
        continue;  // not a port directory; sysfs has none, a hand-made tree might
      }
    }
    inventory.kernel_devices.push_back(std::move(device));
  }
  const auto verbs_dir = root / "class" / "infiniband_verbs";
  for (const auto& name : sorted_entries(verbs_dir)) {
    const auto ibdev = read_first_line(verbs_dir / name / "ibdev");
    for (auto& device : inventory.kernel_devices) {
      if (ibdev && device.name == *ibdev) {
        device.uverbs = name;
      }
    }
  }
  for (const char* module : rdma_modules) {
    if (fs::is_directory(root / "module" / module, ec)) {
      inventory.modules.emplace_back(module);
    }
  }
  const auto net_dir = root / "class" / "net";
  for (const auto& name : sorted_entries(net_dir)) {
    const auto dir = net_dir / name;
    if (!fs::exists(dir / "ifindex", ec)) {
      continue;  // bonding_masters and similar plain files
    }
    Netdev netdev;
    netdev.name = name;
    netdev.type = netdev_type(read_or_empty(dir / "type"));
    netdev.operstate = read_or_empty(dir / "operstate");
    try {
      netdev.ifindex = std::stoi(read_or_empty(dir / "ifindex"));
      netdev.mtu = std::stoi(read_or_empty(dir / "mtu"));
      netdev.up = (std::stoul(read_or_empty(dir / "flags"), nullptr, 16) & 0x1) != 0;  // IFF_UP
    } catch (const std::exception&) {
      netdev.up = false;  // unreadable flags are not taken for an up netdev
    }
    if (netdev.type == "infiniband") {
      netdev.ipoib_gid = ipoib_port_gid(read_or_empty(dir / "address"));
      netdev.pkey = read_hex(dir / "pkey");
    }
    netdev.bus_device = bus_device_of(dir);
    inventory.netdevs.push_back(std::move(netdev));
  }
  link_ipoib_netdevs(inventory);
}

KernelModules read_kernel_modules(const fs::path& modules_root, const std::string& kernel) {
  KernelModules modules;
  modules.release = kernel;
  // Looked for: without the index files modprobe cannot load a module either.
  modules.known = true;
  for (const char* index : {"modules.dep", "modules.builtin"}) {
    std::ifstream file(modules_root / kernel / index);
    if (!file) continue;
    std::string line;
    while (std::getline(file, line)) {
      // "kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko.xz: deps...": the name is the file's
      // up to ".ko"; modprobe treats '-' and '_' alike.
      const auto path = line.substr(0, line.find(':'));
      auto name = path.substr(path.rfind('/') + 1);
      name = name.substr(0, name.find(".ko"));
      std::replace(name.begin(), name.end(), '-', '_');
      const bool rdma = std::find(std::begin(rdma_modules), std::end(rdma_modules), name) != std::end(rdma_modules);
      if (rdma && !modules.has(name)) modules.available.push_back(name);
    }
  }
  std::sort(modules.available.begin(), modules.available.end());
  return modules;
}

}  // namespace rdmakit::diag
