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

#include "lib/base/error.hpp"
#include "lib/base/report.hpp"
#include "lib/diag/diagnosis.hpp"
#include "lib/diag/host_queries.hpp"
#include "lib/diag/sysfs.hpp"

namespace nlohmann {
template <typename T>
struct adl_serializer<std::optional<T>> {
  static void to_json(json& j, const std::optional<T>& value) { j = value ? json(*value) : json(nullptr); }
  static void from_json(const json& j, std::optional<T>& value) {
    value = j.is_null() ? std::nullopt : std::optional<T>(j.get<T>());
  }
};
}  // namespace nlohmann

namespace rdmakit {
// Here, not in lib/core: only the host model reads and writes GID entries as JSON.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(GidEntry, index, gid, type, netdev)
}  // namespace rdmakit

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

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(KernelPort, number, state_code, state, phys_state_code, phys_state,
                                                link_layer, rate, gids)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(KernelDevice, name, index, node_guid, node_type, driver, parent_netdev,
                                                uverbs, ports)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Netdev, name, ifindex, type, operstate, up, mtu, addresses, vlan)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(UserPort, number, state, active_mtu, gid_table_len)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(UserDevice, name, node_guid, index, open_errno, ports)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(DeviceNode, path, exists, mode, access_errno)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Memlock, soft_bytes, hard_bytes, cap_ipc_lock)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(KernelModules, release, known, available)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Step, call, subject, errnum, detail)

nlohmann::json to_json(const Inventory& inv) {
  return {{"kernel_modules", inv.kernel_modules},
          {"rdma_core_present", inv.rdma_core_present},
          {"kernel_indices_known", inv.kernel_indices_known},
          {"kernel_devices", inv.kernel_devices},
          {"userspace_list_errno", inv.userspace_list_errno},
          {"user_devices", inv.user_devices},
          {"provider_dir", inv.provider_dir},
          {"provider_drivers", inv.provider_drivers},
          {"rdma_cm", inv.rdma_cm},
          {"uverbs_nodes", inv.uverbs_nodes},
          {"modules", inv.modules},
          {"memlock", inv.memlock},
          {"netdevs", inv.netdevs}};
}

nlohmann::json to_json(const Attempt& attempt) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& step : attempt.steps) {
    nlohmann::json item = step;
    item["ok"] = step.ok();
    if (!step.ok()) item["errno_name"] = errno_name(step.errnum);
    steps.push_back(std::move(item));
  }
  return {{"steps", steps},
          {"device", attempt.device},
          {"port", attempt.port},
          {"route_source", attempt.route_source},
          {"route_netdev", attempt.route_netdev},
          {"route_gateway", attempt.route_gateway}};
}

nlohmann::json to_json(const Verdict& v) {
  return {{"cause", v.cause.name()}, {"exit_code", static_cast<int>(v.exit_code)},
          {"summary", v.summary},    {"fix", v.fix},
          {"next", v.next},          {"details", v.details},
          {"warnings", v.warnings}};
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

}  // namespace

std::string apply_facts(const nlohmann::json& facts, Inventory& inventory, Attempt& attempt) {
  if (!facts.is_object()) {
    throw UsageError("the document is " + kind_of(facts) + ", not an object");
  }
  if (const auto where = fractional_number(facts)) {
    throw UsageError(fmt::format("{} is {}, not an integer", where->to_string(), facts.at(*where).dump()));
  }
  // One member at a time, so that nlohmann's complaint about a type can name the member.
  const auto member = [&facts](const char* key, const auto& apply) {
    const auto it = facts.find(key);
    if (it == facts.end()) {
      return;
    }
    try {
      apply(*it);
    } catch (const nlohmann::json::exception& error) {
      throw UsageError(fmt::format("\"{}\": {}", key, without_id(error)));
    }
  };
  member("kernel_indices", [&](const nlohmann::json& indices) {
    require_object(indices, "kernel_indices");
    inventory.kernel_indices_known = true;
    for (auto& device : inventory.kernel_devices) {
      if (indices.contains(device.name)) device.index = indices.at(device.name).get<int>();
    }
  });
  member("addresses", [&](const nlohmann::json& addresses) {
    require_object(addresses, "addresses");
    for (auto& netdev : inventory.netdevs) {
      if (addresses.contains(netdev.name)) netdev.addresses = addresses.at(netdev.name).get<std::vector<std::string>>();
    }
  });
  // VLAN netdevs' ids, as /proc/net/vlan/config has them: {"rxenet0.100": 100}.
  member("vlans", [&](const nlohmann::json& vlans) {
    require_object(vlans, "vlans");
    for (auto& netdev : inventory.netdevs) {
      if (vlans.contains(netdev.name)) netdev.vlan = vlans.at(netdev.name).get<int>();
    }
  });
  member("userspace_list_errno", [&](const nlohmann::json& value) { value.get_to(inventory.userspace_list_errno); });
  member("user_devices", [&](const nlohmann::json& value) { value.get_to(inventory.user_devices); });
  member("provider_dir", [&](const nlohmann::json& value) { value.get_to(inventory.provider_dir); });
  member("provider_drivers", [&](const nlohmann::json& value) { value.get_to(inventory.provider_drivers); });
  member("rdma_cm", [&](const nlohmann::json& value) { value.get_to(inventory.rdma_cm); });
  member("uverbs_nodes", [&](const nlohmann::json& value) { value.get_to(inventory.uverbs_nodes); });
  member("memlock", [&](const nlohmann::json& value) { value.get_to(inventory.memlock); });
  member("kernel_modules", [&](const nlohmann::json& value) { value.get_to(inventory.kernel_modules); });
  member("attempt", [&](const nlohmann::json& value) {
    value.at("steps").get_to(attempt.steps);
    attempt.device = value.value("device", "");
    attempt.port = value.value("port", 0);
    attempt.route_source = value.value("route_source", "");
    attempt.route_netdev = value.value("route_netdev", "");
    attempt.route_gateway = value.value("route_gateway", "");
  });
  std::string address;
  member("address", [&](const nlohmann::json& value) { value.get_to(address); });
  return address;
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
