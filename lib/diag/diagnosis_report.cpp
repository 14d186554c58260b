// JSON and text forms of the diagnoser's model, and the facts loader of the fixtures and of
// diag-bind --replay.

#include <algorithm>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "lib/base/described_json.hpp"
#include "lib/base/error.hpp"
#include "lib/base/report.hpp"
#include "lib/diag/diag_json.hpp"
#include "lib/diag/diagnosis.hpp"
#include "lib/diag/host_queries.hpp"
#include "lib/diag/sysfs.hpp"

namespace rdmakit::diag {

namespace {

// ---- The inventory's lines, one area each, in the order shown ----

Check kernel_check(const Inventory& inv) {
  if (!inv.rdma_core_present) {
    return {"kernel", CheckStatus::fail, "no /sys/class/infiniband: no RDMA core in this kernel or sysfs not mounted"};
  }
  if (inv.kernel_devices.empty()) return {"kernel", CheckStatus::fail, "no RDMA devices"};
  std::vector<std::string> names;
  names.reserve(inv.kernel_devices.size());
  for (const auto& d : inv.kernel_devices) {
    names.push_back(fmt::format("{} (index {}, GUID {}, driver {}{})", d.name, index_text(d.index), d.node_guid,
                                d.driver.empty() ? "?" : d.driver,
                                d.parent_netdev.empty() ? "" : " on " + d.parent_netdev));
  }
  return {"kernel", CheckStatus::ok, fmt::format("{} device(s): {}", names.size(), join(names))};
}

Check user_space_check(const Inventory& inv) {
  if (inv.userspace_list_errno != 0) {
    return {"user space", CheckStatus::fail, "ibv_get_device_list failed: " + errno_text(inv.userspace_list_errno)};
  }
  if (inv.user_devices.empty()) {
    return {"user space", inv.kernel_devices.empty() ? CheckStatus::info : CheckStatus::fail,
            "libibverbs lists no devices"};
  }
  std::vector<std::string> names;
  bool all_open = true;
  for (const auto& d : inv.user_devices) {
    names.push_back(fmt::format("{} (index {}, GUID {}{})", d.name, index_text(d.index), d.node_guid,
                                d.open_errno != 0 ? ", cannot open: " + errno_name(d.open_errno) : ""));
    all_open = all_open && d.open_errno == 0;
  }
  const bool mismatch = std::ranges::any_of(inv.kernel_devices,
                                            [&inv](const KernelDevice& d) { return user_view_of(inv, d) == nullptr; });
  return {"user space", mismatch || !all_open ? CheckStatus::fail : CheckStatus::ok,
          fmt::format("libibverbs lists {}: {}", names.size(), join(names))};
}

Check providers_check(const Inventory& inv) {
  std::vector<std::string> missing;
  for (const auto& d : inv.kernel_devices) {
    if (!has_provider(inv, d)) missing.push_back("lib" + provider_for(d.driver) + " for " + d.name);
  }
  if (!missing.empty()) return {"providers", CheckStatus::fail, "missing: " + join(missing)};
  return {"providers", CheckStatus::ok,
          fmt::format("{} provider(s) installed{}", inv.provider_drivers.size(),
                      inv.provider_dir.empty() ? "" : " in " + inv.provider_dir)};
}

Check rdma_cm_check(const Inventory& inv) {
  const auto& node = inv.rdma_cm;
  if (!node.exists) return {"rdma_cm", CheckStatus::fail, node.path + " missing"};
  return {
      "rdma_cm", node.access_errno == 0 ? CheckStatus::ok : CheckStatus::fail,
      fmt::format("{} {}{}", node.path, node.mode,
                  node.access_errno != 0 ? " not accessible: " + errno_name(node.access_errno) : " read/write for us")};
}

Check uverbs_check(const Inventory& inv) {
  if (inv.uverbs_nodes.empty()) {
    return {"uverbs", inv.kernel_devices.empty() ? CheckStatus::info : CheckStatus::fail,
            "no /dev/infiniband/uverbs* nodes"};
  }
  std::vector<std::string> nodes;
  bool bad = false;
  for (const auto& n : inv.uverbs_nodes) {
    nodes.push_back(
        fmt::format("{} {}{}", n.path, n.mode, n.access_errno != 0 ? " (" + errno_name(n.access_errno) + ")" : ""));
    bad = bad || n.access_errno != 0;
  }
  return {"uverbs", bad ? CheckStatus::fail : CheckStatus::ok, join(nodes)};
}

Check modules_check(const Inventory& inv) {
  const auto has = [&inv](const char* m) { return std::ranges::find(inv.modules, m) != inv.modules.end(); };
  const bool core = has("ib_core") && has("ib_uverbs") && has("rdma_cm") && has("rdma_ucm");
  return {"modules", core ? CheckStatus::ok : CheckStatus::warn,
          (inv.modules.empty() ? std::string("none loaded") : join(inv.modules, " ")) +
              (core ? "" : " (rdma_ucm is loaded on first use by librdmacm; ib_uverbs is needed for verbs)")};
}

Check memlock_check(const Inventory& inv) {
  const auto& m = inv.memlock;
  const bool low = m.soft_bytes && *m.soft_bytes < recommended_memlock && !m.cap_ipc_lock;
  return {"memlock", low ? CheckStatus::warn : CheckStatus::ok,
          fmt::format("soft {}, hard {}{}", m.soft_bytes ? human_bytes(*m.soft_bytes) : "unlimited",
                      m.hard_bytes ? human_bytes(*m.hard_bytes) : "unlimited",
                      m.cap_ipc_lock ? " (CAP_IPC_LOCK: not enforced)" : "")};
}

Check netdevs_check(const Inventory& inv) {
  const auto with_rdma = rdma_netdevs(inv);
  std::vector<std::string> lines;
  for (const auto& n : inv.netdevs) {
    const bool rdma = std::ranges::find(with_rdma, n.name) != with_rdma.end();
    lines.push_back(fmt::format("{} {} {}{}{}", n.name, n.up ? "up" : "DOWN", n.operstate,
                                n.addresses.empty() ? "" : " " + join(n.addresses, " "), rdma ? " [RDMA]" : ""));
  }
  return {"netdevs", CheckStatus::info, join(lines, "; ")};
}

}  // namespace

std::string_view to_string(CheckStatus status) {
  switch (status) {
    case CheckStatus::ok: return "ok";
    case CheckStatus::warn: return "warn";
    case CheckStatus::fail: return "fail";
    case CheckStatus::info: return "info";
  }
  return "info";
}

std::vector<Check> assess(const Inventory& inventory) {
  static constexpr Check (*areas[])(const Inventory&) = {kernel_check,  user_space_check, providers_check,
                                                         rdma_cm_check, uverbs_check,     modules_check,
                                                         memlock_check, netdevs_check};
  std::vector<Check> checks;
  for (const auto area : areas) checks.push_back(area(inventory));
  return checks;
}

namespace {

using described::Describes;

// diag-bind's description of its host model: what the report writes and --replay's facts.json
// reads back. The keys are the members' names; a key an older report lacks keeps its default.
struct DiagBindJson : DiagJson {
  // Forwarded: see ConnectJson (connect_json.cpp).
  static void members(Describes<GidEntry> auto& gid, auto&& visit) { DiagJson::members(gid, visit); }
  static void members(Describes<Verdict> auto& verdict, auto&& visit) { DiagJson::members(verdict, visit); }
  // A host's facts: a big host has many netdevs (a container host, one per veth).
  static constexpr described::ReadLimits limits{.max_text_bytes = 4096, .max_list_entries = 16384};

  static void members(Describes<KernelPort> auto& port, auto&& visit) {
    visit("number", port.number);
    visit("state_code", port.state_code);
    visit("state", port.state);
    visit("phys_state_code", port.phys_state_code);
    visit("phys_state", port.phys_state);
    visit("link_layer", port.link_layer);
    visit("rate", port.rate);
    visit("gids", port.gids);
  }
  static void members(Describes<KernelDevice> auto& device, auto&& visit) {
    visit("name", device.name);
    visit("index", device.index);
    visit("node_guid", device.node_guid);
    visit("node_type", device.node_type);
    visit("driver", device.driver);
    visit("parent_netdev", device.parent_netdev);
    visit("uverbs", device.uverbs);
    visit("ports", device.ports);
  }
  static void members(Describes<Netdev> auto& netdev, auto&& visit) {
    visit("name", netdev.name);
    visit("ifindex", netdev.ifindex);
    visit("type", netdev.type);
    visit("operstate", netdev.operstate);
    visit("up", netdev.up);
    visit("mtu", netdev.mtu);
    visit("addresses", netdev.addresses);
    visit("vlan", netdev.vlan);
  }
  static void members(Describes<UserPort> auto& port, auto&& visit) {
    visit("number", port.number);
    visit("state", port.state);
    visit("active_mtu", port.active_mtu);
    visit("gid_table_len", port.gid_table_len);
  }
  static void members(Describes<UserDevice> auto& device, auto&& visit) {
    visit("name", device.name);
    visit("node_guid", device.node_guid);
    visit("index", device.index);
    visit("open_errno", device.open_errno);
    visit("ports", device.ports);
  }
  static void members(Describes<DeviceNode> auto& node, auto&& visit) {
    visit("path", node.path);
    visit("exists", node.exists);
    visit("mode", node.mode);
    visit("access_errno", node.access_errno);
  }
  static void members(Describes<Memlock> auto& memlock, auto&& visit) {
    visit("soft_bytes", memlock.soft_bytes);
    visit("hard_bytes", memlock.hard_bytes);
    visit("cap_ipc_lock", memlock.cap_ipc_lock);
  }
  static void members(Describes<KernelModules> auto& modules, auto&& visit) {
    visit("release", modules.release);
    visit("known", modules.known);
    visit("available", modules.available);
  }
  static void members(Describes<Inventory> auto& inventory, auto&& visit) {
    visit("kernel_modules", inventory.kernel_modules);
    visit("rdma_core_present", inventory.rdma_core_present);
    visit("kernel_indices_known", inventory.kernel_indices_known);
    visit("kernel_devices", inventory.kernel_devices);
    visit("userspace_list_errno", inventory.userspace_list_errno);
    visit("user_devices", inventory.user_devices);
    visit("provider_dir", inventory.provider_dir);
    visit("provider_drivers", inventory.provider_drivers);
    visit("rdma_cm", inventory.rdma_cm);
    visit("uverbs_nodes", inventory.uverbs_nodes);
    visit("modules", inventory.modules);
    visit("memlock", inventory.memlock);
    visit("netdevs", inventory.netdevs);
  }
  // The report adds each step's "ok" and "errno_name" (to_json(Attempt)).
  static void members(Describes<Step> auto& step, auto&& visit) {
    visit("call", step.call);
    visit("subject", step.subject);
    visit("errnum", step.errnum);
    visit("detail", step.detail);
  }
  static void members(Describes<Attempt> auto& attempt, auto&& visit) {
    visit("steps", attempt.steps);
    visit("device", attempt.device);
    visit("port", attempt.port);
    visit("route_source", attempt.route_source);
    visit("route_netdev", attempt.route_netdev);
    visit("route_gateway", attempt.route_gateway);
  }
};

}  // namespace

nlohmann::json to_json(const Inventory& inv) {
  return described::write<DiagBindJson>(inv);
}

nlohmann::json to_json(const Attempt& attempt) {
  auto document = described::write<DiagBindJson>(attempt);
  for (std::size_t i = 0; i < attempt.steps.size(); ++i) {
    const auto& step = attempt.steps[i];
    auto& item = document["steps"][i];
    item["ok"] = step.ok();
    if (!step.ok()) item["errno_name"] = errno_name(step.errnum);
  }
  return document;
}

nlohmann::json to_json(const Verdict& v) {
  return described::write<DiagBindJson>(v);
}

nlohmann::json to_json(const Check& check) {
  return {{"area", check.area}, {"status", to_string(check.status)}, {"text", check.text}};
}

nlohmann::json to_json(const Diagnosis& d) {
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& check : assess(d.inventory)) checks.push_back(to_json(check));
  return {{"address", d.target.host},
          {"checks", checks},
          {"inventory", to_json(d.inventory)},
          {"attempt", to_json(d.attempt)},
          {"verdict", to_json(d.verdict)}};
}

std::vector<described::SchemaShape> diag_bind_json_shapes() {
  using described::shape;
  const auto common = [](const char* name, nlohmann::json form, std::vector<std::string> extras = {}) {
    return described::SchemaShape{
        .schema = "common", .pointer = std::string("/$defs/") + name, .shape = form, .extra_keys = std::move(extras)};
  };
  return {common("kernel_port", shape<DiagBindJson, KernelPort>()),
          common("kernel_device", shape<DiagBindJson, KernelDevice>()),
          common("user_port", shape<DiagBindJson, UserPort>()),
          common("user_device", shape<DiagBindJson, UserDevice>()),
          common("device_node", shape<DiagBindJson, DeviceNode>()),
          common("memlock", shape<DiagBindJson, Memlock>()),
          common("netdev", shape<DiagBindJson, Netdev>()),
          common("inventory", shape<DiagBindJson, Inventory>()),
          common("attempt_step", shape<DiagBindJson, Step>(), {"ok", "errno_name"}),
          common("attempt", shape<DiagBindJson, Attempt>(), {"steps[].ok", "steps[].errno_name"}),
          common("verdict", shape<DiagBindJson, Verdict>())};
}

void DiagnosisResult::add_to(nlohmann::json& document) const {
  auto keys = to_json(diagnosis_);
  for (auto item = keys.begin(); item != keys.end(); ++item) document[item.key()] = std::move(item.value());
}

std::string DiagnosisResult::text() const {
  return render_text(diagnosis_.target, diagnosis_.inventory, diagnosis_.attempt, diagnosis_.verdict);
}

namespace {

// nlohmann's messages open with their id ("[json.exception.type_error.302] "); the rest says
// what was wrong.
std::string without_id(const nlohmann::json::exception& error) {
  const std::string text = error.what();
  const auto end = text.find("] ");
  return end == std::string::npos ? text : text.substr(end + 2);
}

// Where a fractional number is in the document, if anywhere. Facts hold integers only, and
// nlohmann's get<int>() of a fractional number is a plain cast, undefined behaviour out of
// int's range. A walk with its own stack: the file may nest deeper than ours would allow.
std::optional<nlohmann::json::json_pointer> fractional_number(const nlohmann::json& document) {
  struct Pending {
    const nlohmann::json* value;
    std::size_t depth;  // 0 for the document itself
    std::string token;  // the member name or array index that leads to it
  };
  std::vector<Pending> pending{{&document, 0, {}}};
  std::vector<std::string> path;  // tokens from the document to the value at hand
  while (!pending.empty()) {
    auto [value, depth, token] = std::move(pending.back());
    pending.pop_back();
    path.resize(depth > 0 ? depth - 1 : 0);
    if (depth > 0) path.push_back(std::move(token));
    if (value->is_number_float()) {
      nlohmann::json::json_pointer where;
      for (const auto& step : path) where /= step;
      return where;
    }
    if (value->is_object()) {
      for (const auto& [key, item] : value->items()) pending.push_back({&item, depth + 1, key});
    } else if (value->is_array()) {
      for (std::size_t i = 0; i < value->size(); ++i) pending.push_back({&(*value)[i], depth + 1, std::to_string(i)});
    }
  }
  return std::nullopt;
}

// "an array", "a string", "null": what a value is, for messages.
std::string kind_of(const nlohmann::json& value) {
  if (value.is_null()) return "null";
  return (value.is_array() || value.is_object() ? "an " : "a ") + std::string(value.type_name());
}

// Members looked up by name (device, netdev) must be objects: any other type has no names,
// and nlohmann's contains() would quietly say "not there".
void require_object(const nlohmann::json& value, const char* key) {
  if (!value.is_object()) {
    throw UsageError(fmt::format("\"{}\" is {}, not an object", key, kind_of(value)));
  }
}

// One member at a time, so that a complaint about a type can name the member.
template <typename Apply>
void with_member(const nlohmann::json& facts, const char* key, const Apply& apply) {
  const auto it = facts.find(key);
  if (it == facts.end()) return;
  try {
    apply(*it);
  } catch (const nlohmann::json::exception& error) {
    throw UsageError(fmt::format("\"{}\": {}", key, without_id(error)));
  }
}

// What the sysfs tree does not hold, by device or netdev name: kernel indices, addresses,
// VLAN ids (as /proc/net/vlan/config has them: {"rxenet0.100": 100}).
void apply_named_facts(const nlohmann::json& facts, Inventory& inventory) {
  with_member(facts, "kernel_indices", [&](const nlohmann::json& indices) {
    require_object(indices, "kernel_indices");
    inventory.kernel_indices_known = true;
    for (auto& device : inventory.kernel_devices) {
      if (indices.contains(device.name)) device.index = indices.at(device.name).get<int>();
    }
  });
  with_member(facts, "addresses", [&](const nlohmann::json& addresses) {
    require_object(addresses, "addresses");
    for (auto& netdev : inventory.netdevs) {
      if (addresses.contains(netdev.name)) netdev.addresses = addresses.at(netdev.name).get<std::vector<std::string>>();
    }
  });
  with_member(facts, "vlans", [&](const nlohmann::json& vlans) {
    require_object(vlans, "vlans");
    for (auto& netdev : inventory.netdevs) {
      if (vlans.contains(netdev.name)) netdev.vlan = vlans.at(netdev.name).get<int>();
    }
  });
}

// The inventory's own keys and the attempt, as the report writes them; returns the address.
std::string apply_described_facts(const nlohmann::json& facts, Inventory& inventory, Attempt& attempt) {
  const auto described_member = [&facts](const char* key, auto& out) {
    with_member(facts, key, [&out, key](const nlohmann::json& value) {
      try {
        described::read<DiagBindJson>(value, key, out);
      } catch (const ProtocolError& error) {
        throw UsageError(error.what());
      }
    });
  };
  described_member("userspace_list_errno", inventory.userspace_list_errno);
  described_member("user_devices", inventory.user_devices);
  described_member("provider_dir", inventory.provider_dir);
  described_member("provider_drivers", inventory.provider_drivers);
  described_member("rdma_cm", inventory.rdma_cm);
  described_member("uverbs_nodes", inventory.uverbs_nodes);
  described_member("memlock", inventory.memlock);
  described_member("kernel_modules", inventory.kernel_modules);
  // An attempt is its steps: facts without them are no attempt.
  with_member(facts, "attempt", [](const nlohmann::json& value) {
    if (value.is_object() && !value.contains("steps")) throw UsageError("attempt.steps: missing");
  });
  described_member("attempt", attempt);
  std::string address;
  described_member("address", address);
  return address;
}

}  // namespace

std::string apply_facts(const nlohmann::json& facts, Inventory& inventory, Attempt& attempt) {
  if (!facts.is_object()) {
    throw UsageError("the document is " + kind_of(facts) + ", not an object");
  }
  if (const auto where = fractional_number(facts)) {
    throw UsageError(fmt::format("{} is {}, not an integer", where->to_string(), facts.at(*where).dump()));
  }
  apply_named_facts(facts, inventory);
  return apply_described_facts(facts, inventory, attempt);
}

Replay load_replay(const std::filesystem::path& dir) {
  const std::string option = "--replay " + dir.string();
  std::ifstream in(dir / "facts.json");
  if (!in) {
    throw UsageError(option + ": cannot read facts.json there");
  }
  nlohmann::json facts;
  try {
    facts = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& error) {
    throw UsageError(option + ": facts.json is not valid JSON: " + error.what());
  }
  Replay replay;
  read_sysfs(dir / "sys", replay.inventory);
  try {
    replay.address = apply_facts(facts, replay.inventory, replay.attempt);
  } catch (const UsageError& error) {
    throw UsageError(option + ": facts.json: " + error.what());
  }
  return replay;
}

namespace {

const char* marker(CheckStatus status) {
  switch (status) {
    case CheckStatus::ok: return "ok  ";
    case CheckStatus::warn: return "WARN";
    case CheckStatus::fail: return "FAIL";
    case CheckStatus::info: return "    ";
  }
  return "    ";
}

}  // namespace

std::string render_verdict(const Verdict& v) {
  std::ostringstream out;
  out << fmt::format("verdict: {} (exit {})\n  {}\n", v.cause.name(), static_cast<int>(v.exit_code), v.summary);
  for (const auto& detail : v.details) out << "  " << detail << "\n";
  if (!v.fix.empty()) out << "  fix: " << v.fix << "\n";
  if (!v.next.empty()) out << "  next: " << v.next << "\n";
  for (const auto& warning : v.warnings) out << "  warning: " << warning << "\n";
  return out.str();
}

namespace {

// Each port the kernel has, its state beside libibverbs' active MTU, and its GIDs.
void render_ports(const Inventory& inv, std::ostringstream& out) {
  for (const auto& device : inv.kernel_devices) {
    for (const auto& port : device.ports) {
      const int mtu = active_mtu(inv, device.name, port.number);
      out << fmt::format("  {} port {}: {} / {}, {}{}{}\n", device.name, port.number, port.state, port.phys_state,
                         port.link_layer, mtu != 0 ? fmt::format(", active MTU {}", mtu) : "",
                         port.rate.empty() ? "" : ", " + port.rate);
      for (const auto& gid : port.gids) {
        out << fmt::format("    GID {:<3} {:<28} {:<8} {}\n", gid.index, gid.gid, gid.type, gid.netdev);
      }
    }
  }
}

std::string step_outcome(const Step& step) {
  if (step.ok()) return step.detail.empty() ? "ok" : "ok: " + step.detail;
  return fmt::format("failed: {} ({}){}", errno_name(step.errnum), std::strerror(step.errnum),
                     step.detail.empty() ? "" : ", " + step.detail);
}

}  // namespace

std::string render_text(const Target& target, const Inventory& inv, const Attempt& attempt, const Verdict& v) {
  std::ostringstream out;
  out << "inventory\n";
  for (const auto& check : assess(inv)) {
    out << fmt::format("  {:<11} {} {}\n", check.area, marker(check.status), check.text);
  }
  render_ports(inv, out);
  out << "attempt" << (target.host.empty() ? "" : " for " + target.host) << "\n";
  for (const auto& step : attempt.steps) {
    out << fmt::format("  {:<26} {:<28} {}\n", step.call, step.subject, step_outcome(step));
  }
  out << render_verdict(v);
  return out.str();
}

}  // namespace rdmakit::diag
