// JSON and text forms of the diagnoser's model, and the facts loader the fixtures use.

#include <sstream>

#include <fmt/format.h>

#include "lib/diag.hpp"
#include "lib/report.hpp"

namespace nlohmann {
template <typename T>
struct adl_serializer<std::optional<T>> {
  static void to_json(json& j, const std::optional<T>& value) { j = value ? json(*value) : json(nullptr); }
  static void from_json(const json& j, std::optional<T>& value) {
    value = j.is_null() ? std::nullopt : std::optional<T>(j.get<T>());
  }
};
}  // namespace nlohmann

namespace rdmakit::diag {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(GidEntry, index, gid, type, netdev)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(KernelPort, number, state_code, state, phys_state_code, phys_state,
                                                link_layer, rate, gids)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(KernelDevice, name, index, node_guid, node_type, driver, parent_netdev,
                                                uverbs, ports)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Netdev, name, ifindex, type, operstate, up, mtu, addresses)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(UserPort, number, state, active_mtu)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(UserDevice, name, node_guid, index, open_errno, ports)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(DeviceNode, path, exists, mode, access_errno)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Memlock, soft_bytes, hard_bytes, cap_ipc_lock)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Step, call, subject, errnum, detail)

nlohmann::json to_json(const Inventory& inv) {
  return {{"rdma_core_present", inv.rdma_core_present},
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
  return {{"steps", steps}, {"device", attempt.device}, {"port", attempt.port}, {"route_source", attempt.route_source}};
}

nlohmann::json to_json(const Verdict& v) {
  return {{"cause", v.cause}, {"exit_code", v.exit_code}, {"summary", v.summary},
          {"fix", v.fix},     {"details", v.details},     {"warnings", v.warnings}};
}

nlohmann::json to_json(const Check& check) {
  return {{"area", check.area}, {"status", check.status}, {"text", check.text}};
}

void apply_facts(const nlohmann::json& facts, Inventory& inventory, Attempt& attempt) {
  if (const auto it = facts.find("kernel_indices"); it != facts.end()) {
    inventory.kernel_indices_known = true;
    for (auto& device : inventory.kernel_devices) {
      if (it->contains(device.name)) device.index = it->at(device.name).get<int>();
    }
  }
  if (const auto it = facts.find("addresses"); it != facts.end()) {
    for (auto& netdev : inventory.netdevs) {
      if (it->contains(netdev.name)) netdev.addresses = it->at(netdev.name).get<std::vector<std::string>>();
    }
  }
  inventory.userspace_list_errno = facts.value("userspace_list_errno", inventory.userspace_list_errno);
  if (facts.contains("user_devices")) facts.at("user_devices").get_to(inventory.user_devices);
  inventory.provider_dir = facts.value("provider_dir", inventory.provider_dir);
  if (facts.contains("provider_drivers")) facts.at("provider_drivers").get_to(inventory.provider_drivers);
  if (facts.contains("rdma_cm")) facts.at("rdma_cm").get_to(inventory.rdma_cm);
  if (facts.contains("uverbs_nodes")) facts.at("uverbs_nodes").get_to(inventory.uverbs_nodes);
  if (facts.contains("memlock")) facts.at("memlock").get_to(inventory.memlock);
  if (const auto it = facts.find("attempt"); it != facts.end()) {
    it->at("steps").get_to(attempt.steps);
    attempt.device = it->value("device", "");
    attempt.port = it->value("port", 0);
    attempt.route_source = it->value("route_source", "");
  }
}

namespace {

const char* marker(const std::string& status) {
  if (status == "ok") return "ok  ";
  if (status == "warn") return "WARN";
  if (status == "fail") return "FAIL";
  return "    ";
}

}  // namespace

std::string render_verdict(const Verdict& v) {
  std::ostringstream out;
  out << fmt::format("verdict: {} (exit {})\n  {}\n", v.cause, v.exit_code, v.summary);
  for (const auto& detail : v.details) out << "  " << detail << "\n";
  if (!v.fix.empty()) out << "  fix: " << v.fix << "\n";
  for (const auto& warning : v.warnings) out << "  warning: " << warning << "\n";
  return out.str();
}

std::string render_text(const Target& target, const Inventory& inv, const Attempt& attempt, const Verdict& v) {
  std::ostringstream out;
  out << "inventory\n";
  for (const auto& check : assess(inv)) {
    out << fmt::format("  {:<11} {} {}\n", check.area, marker(check.status), check.text);
  }
  for (const auto& device : inv.kernel_devices) {
    for (const auto& port : device.ports) {
      int mtu = 0;
      for (const auto& user : inv.user_devices) {
        if (user.name != device.name) continue;
        for (const auto& up : user.ports) {
          if (up.number == port.number) mtu = up.active_mtu;
        }
      }
      out << fmt::format("  {} port {}: {} / {}, {}{}{}\n", device.name, port.number, port.state, port.phys_state,
                         port.link_layer, mtu ? fmt::format(", active MTU {}", mtu) : "",
                         port.rate.empty() ? "" : ", " + port.rate);
      for (const auto& gid : port.gids) {
        out << fmt::format("    GID {:<3} {:<28} {:<8} {}\n", gid.index, gid.gid, gid.type, gid.netdev);
      }
    }
  }
  out << "attempt" << (target.host.empty() ? "" : " for " + target.host) << "\n";
  for (const auto& step : attempt.steps) {
    out << fmt::format("  {:<26} {:<28} {}\n", step.call, step.subject,
                       step.ok() ? (step.detail.empty() ? "ok" : "ok: " + step.detail)
                                 : fmt::format("failed: {} ({}){}", errno_name(step.errnum), std::strerror(step.errnum),
                                               step.detail.empty() ? "" : ", " + step.detail));
  }
  out << render_verdict(v);
  return out.str();
}

}  // namespace rdmakit::diag
