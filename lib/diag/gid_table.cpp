#include "lib/diag/gid_table.hpp"

#include <algorithm>
#include <charconv>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "lib/base/text_file.hpp"
#include "lib/diag/diag_json.hpp"
#include "lib/diag/host_queries.hpp"

namespace rdmakit::diag {

std::vector<GidRow> gid_rows(const Inventory& inventory) {
  std::vector<GidRow> rows;
  for (const auto& port : gid_ports(inventory)) {
    for (const auto& entry : port.gids) {
      const auto netdev = std::ranges::find_if(
          inventory.netdevs, [&entry](const Netdev& n) { return !entry.netdev.empty() && n.name == entry.netdev; });
      rows.push_back({.device = port.device,
                      .port = port.port,
                      .entry = entry,
                      .ipv4 = ipv4_of(entry),
                      .vlan = netdev != inventory.netdevs.end() ? netdev->vlan : std::nullopt,
                      .link_local = is_link_local(entry)});
    }
  }
  return rows;
}

std::map<std::string, int> parse_vlan_config(std::string_view text) {
  std::map<std::string, int> vlans;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const auto line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    // "NAME | ID | PARENT"; the header lines ("VLAN Dev name | VLAN ID", "Name-Type: ...")
    // have no number in the second field.
    const auto bar = line.find('|');
    if (bar == std::string_view::npos) continue;
    const auto name = trimmed(line.substr(0, bar));
    auto rest = line.substr(bar + 1);
    const auto id_text = trimmed(rest.substr(0, rest.find('|')));
    int id = 0;
    const auto [ptr, error] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
    if (name.empty() || error != std::errc() || ptr != id_text.data() + id_text.size()) continue;
    vlans[std::string(name)] = id;
  }
  return vlans;
}

namespace {

// The advice for an address without a GID of its own: the first port GID that `serves` its
// netdev, and why (`reason(netdev, device, port)`).
template <typename Serves, typename Reason>
std::optional<GidAdvice> netdev_entry_advice(const Inventory& inventory, const std::string& source, Serves serves,
                                             Reason reason) {
  const auto* netdev = netdev_with_address(inventory, source);
  if (netdev == nullptr) return std::nullopt;
  for (const auto& device : inventory.kernel_devices) {
    for (const auto& port : device.ports) {
      for (const auto& entry : port.gids) {
        if (!serves(*netdev, entry)) continue;
        return GidAdvice{.address = source,
                         .device = device.name,
                         .port = port.number,
                         .entry = entry,
                         .reason = reason(*netdev, device, port)};
      }
    }
  }
  return std::nullopt;
}

// An address on IPoIB: the entry is that of the port its netdev runs on, the GID in the
// netdev's hardware address. On an iWARP RNIC's netdev: the port's one entry, its MAC, which
// no stack needs (rdma_cm connects over TCP by address).
std::optional<GidAdvice> advice_without_own_gid(const Inventory& inventory, const std::string& source) {
  if (auto ipoib = netdev_entry_advice(
          inventory, source,
          [](const Netdev& netdev, const GidEntry& entry) {
            return !netdev.ipoib_gid.empty() && entry.gid == netdev.ipoib_gid;
          },
          [&source](const Netdev& netdev, const KernelDevice& device, const KernelPort& port) {
            return fmt::format(
                "{} is on IPoIB netdev {}, which runs on {} port {}: on InfiniBand the GID is the "
                "port's (the address has none of its own); within one subnet the stacks reach "
                "peers by LID, and the index matters only through IB routers",
                source, netdev.name, device.name, port.number);
          })) {
    return ipoib;
  }
  return netdev_entry_advice(
      inventory, source,
      [](const Netdev& netdev, const GidEntry& entry) { return entry.type == "iWARP" && entry.netdev == netdev.name; },
      [&source](const Netdev& netdev, const KernelDevice& device, const KernelPort& port) {
        return fmt::format(
            "{} is on {}, which {} port {} serves over iWARP: its one GID is the port's MAC and "
            "rdma_cm connects over TCP by address, so the index matters to no stack",
            source, netdev.name, device.name, port.number);
      });
}

}  // namespace

GidLookup look_up_gid(const Inventory& inventory, const std::string& address, const std::string& route_source) {
  GidLookup lookup;
  lookup.address = canonical(address);
  lookup.source = address_is_local(inventory, lookup.address) ? lookup.address : canonical(route_source);
  if (lookup.source.empty()) {
    lookup.advice.address = lookup.address;
    lookup.advice.reason =
        fmt::format("the kernel has no route to {}, so no address of this host reaches it", lookup.address);
    return lookup;
  }
  lookup.advice = advise_gid(gid_ports(inventory), lookup.source);
  if (!lookup.advice.entry) {
    if (auto advice = advice_without_own_gid(inventory, lookup.source)) lookup.advice = std::move(*advice);
  }
  lookup.settings = stack_settings(lookup.advice);
  return lookup;
}

namespace {

using described::Describes;

// --gids ADDRESS's advice as the report has it: the entry's port, index, GID and type, null
// or empty when no entry suits the address.
struct AdviceRecord {
  std::string address;
  std::string source;
  std::string device;
  std::optional<int> port;
  std::optional<int> index;
  std::string gid;
  std::string type;
  std::string reason;
  std::vector<StackSetting> settings;
};

struct GidTableJson : DiagJson {
  static constexpr described::ReadLimits limits{};
  static void members(Describes<GidEntry> auto& gid, auto&& visit) { DiagJson::members(gid, visit); }
  static void members(Describes<GidRow> auto& row, auto&& visit) {
    visit("device", row.device);
    visit("port", row.port);
    members(row.entry, visit);  // the entry's keys beside the row's
    visit("ipv4", row.ipv4, described::null_when_unset);
    visit("vlan", row.vlan);
    visit("link_local", row.link_local);
  }
  static void members(Describes<StackSetting> auto& setting, auto&& visit) {
    visit("stack", setting.stack);
    visit("setting", setting.setting);
  }
  static void members(Describes<AdviceRecord> auto& advice, auto&& visit) {
    visit("address", advice.address);
    visit("source", advice.source);
    visit("device", advice.device);
    visit("port", advice.port);
    visit("index", advice.index);
    visit("gid", advice.gid);
    visit("type", advice.type);
    visit("reason", advice.reason);
    visit("settings", advice.settings);
  }
};

}  // namespace

nlohmann::json to_json(const GidRow& row) {
  return described::write<GidTableJson>(row);
}

nlohmann::json to_json(const GidLookup& lookup) {
  const auto& advice = lookup.advice;
  const auto& entry = advice.entry;
  return described::write<GidTableJson>(AdviceRecord{.address = lookup.address,
                                                     .source = lookup.source,
                                                     .device = advice.device,
                                                     .port = entry ? std::optional(advice.port) : std::nullopt,
                                                     .index = entry ? std::optional(entry->index) : std::nullopt,
                                                     .gid = entry ? entry->gid : std::string(),
                                                     .type = entry ? entry->type : std::string(),
                                                     .reason = advice.reason,
                                                     .settings = lookup.settings});
}

std::vector<described::SchemaShape> gid_table_shapes() {
  return {{.schema = "diag-bind",
           .pointer = "/$defs/gid_row",
           .shape = described::shape<GidTableJson, GidRow>(),
           .extra_keys = {}},
          {.schema = "diag-bind",
           .pointer = "/$defs/advice",
           .shape = described::shape<GidTableJson, AdviceRecord>(),
           .extra_keys = {}}};
}

namespace {

// show_gids' VER column.
std::string version_of(const std::string& type) {
  if (type == "RoCE v2") return "v2";
  if (type == "RoCE v1") return "v1";
  return type;
}

}  // namespace

std::string render_gid_table(const std::vector<GidRow>& rows) {
  std::ostringstream out;
  // As wide as the longest name: mlx5_bond_0 and iwp24s0f0 do not fit show_gids' 8 columns.
  std::size_t device_width = 8;
  std::size_t version_width = 3;
  for (const auto& row : rows) {
    device_width = std::max(device_width, row.device.size());
    version_width = std::max(version_width, version_of(row.entry.type).size());
  }
  const auto line = [&](std::string_view device, std::string_view port, std::string_view index, std::string_view gid,
                        std::string_view ipv4, std::string_view version, std::string_view netdev,
                        std::string_view vlan) {
    auto text = fmt::format("{:<{}} {:<4} {:<5} {:<39} {:<15} {:<{}} {:<15} {}", device, device_width, port, index, gid,
                            ipv4, version, version_width, netdev, vlan);
    text.erase(text.find_last_not_of(' ') + 1);
    out << text << "\n";
  };
  line("DEV", "PORT", "INDEX", "GID", "IPv4", "VER", "NETDEV", "VLAN");
  for (const auto& row : rows) {
    line(row.device, std::to_string(row.port), std::to_string(row.entry.index), row.entry.gid, row.ipv4,
         version_of(row.entry.type), row.entry.netdev, row.vlan ? std::to_string(*row.vlan) : "");
  }
  out << fmt::format("{} entr{}\n", rows.size(), rows.size() == 1 ? "y" : "ies");
  return out.str();
}

std::string render_gid_lookup(const GidLookup& lookup, const SiblingNames& siblings) {
  std::ostringstream out;
  const auto& advice = lookup.advice;
  if (!lookup.source.empty() && lookup.source != lookup.address) {
    out << fmt::format("{} is reached from {}\n", lookup.address, lookup.source);
  }
  if (!advice.entry) {
    out << fmt::format("{}: no GID index: {}\n", lookup.source.empty() ? lookup.address : lookup.source, advice.reason);
    out << fmt::format("  run '{} {}' to see why\n", siblings.diag_bind(), lookup.address);
    return out.str();
  }
  const auto& e = *advice.entry;
  out << fmt::format("{}: {} port {} index {} ({} {}{})\n", lookup.source, advice.device, advice.port, e.index, e.gid,
                     e.type, e.netdev.empty() ? "" : " on " + e.netdev);
  out << "  why: " << advice.reason << "\n";
  for (const auto& s : lookup.settings) out << fmt::format("  {:<18} {}\n", s.stack, s.setting);
  return out.str();
}

void GidReport::add_to(nlohmann::json& document) const {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : rows_) rows.push_back(to_json(row));
  document["gids"] = std::move(rows);
  if (lookup_) document["advice"] = to_json(*lookup_);
}

std::string GidReport::text() const {
  auto text = render_gid_table(rows_);
  if (lookup_) text += "\n" + render_gid_lookup(*lookup_, siblings_);
  return text;
}

std::optional<std::string> GidReport::outcome() const {
  return exit_code() == ExitCode::ok ? "ok" : "no_gid";
}

ExitCode GidReport::exit_code() const {
  return !lookup_ || lookup_->advice.entry ? ExitCode::ok : ExitCode::cause_found;
}

}  // namespace rdmakit::diag
