#include "lib/diag/host_view_read.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <system_error>

#include "lib/diag/host_queries.hpp"
#include "lib/diag/sysfs.hpp"

namespace rdmakit::diag {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::int64_t roce_v2_port = 4791;

// A ViewDevice names one netdev, so a RoCE NIC (no parent netdev) takes its GIDs' first.
// Not device_netdev(), which stays the parent alone: ports_serving and rdma_device_on match
// the GIDs' netdevs themselves, port by port.
std::string netdev_of(const KernelDevice& device) {
  if (!device.parent_netdev.empty()) return device.parent_netdev;
  for (const auto& port : device.ports) {
    for (const auto& gid : port.gids) {
      if (!gid.netdev.empty()) return gid.netdev;
    }
  }
  return {};
}

int read_int(const fs::path& file) {
  const auto line = read_first_line(file);
  int value = -1;
  if (!line || std::from_chars(line->data(), line->data() + line->size(), value).ec != std::errc{}) return -1;
  return value;
}

std::string roce_mode_of(const fs::path& configfs_root, const std::string& device, const ViewPort& port) {
  // An iWARP port has no RoCE mode, whatever configfs shows for it ("IB/RoCE v1").
  if (port.link_layer != "Ethernet" || is_iwarp_port(port)) return {};
  const auto file = configfs_root / "rdma_cm" / device / "ports" / std::to_string(port.number) / "default_roce_mode";
  if (auto mode = read_first_line(file)) return *mode;
  // No entry: nobody configured the device in configfs (or configfs is not mounted), so the
  // kernel's default applies. An entry we may not read tells nothing.
  std::error_code ec;
  return fs::status(file, ec).type() == fs::file_type::not_found ? "RoCE v2" : "";
}

// ---- nftables' JSON ----

const json* member(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string text_member(const json& object, const char* key) {
  const auto* value = member(object, key);
  return value != nullptr && value->is_string() ? value->get<std::string>() : std::string{};
}

// "family table name" of a chain, a set or (with name_key "chain") a rule's chain.
std::string qualified(const json& object, const char* name_key) {
  return text_member(object, "family") + " " + text_member(object, "table") + " " + text_member(object, name_key);
}

// What the rules refer to: named sets' elements and base chains' hooks, by qualified name.
struct Ruleset {
  std::map<std::string, const json*> set_elements;
  std::map<std::string, std::string> chain_hooks;
};

Ruleset index_ruleset(const json& objects) {
  Ruleset ruleset;
  for (const auto& object : objects) {
    if (const auto* set = member(object, "set")) {
      if (const auto* elements = member(*set, "elem")) ruleset.set_elements[qualified(*set, "name")] = elements;
    } else if (const auto* chain = member(object, "chain")) {
      ruleset.chain_hooks[qualified(*chain, "name")] = text_member(*chain, "hook");
    }
  }
  return ruleset;
}

// Where a rule's "@name" set references resolve: its own family and table.
struct Scope {
  const Ruleset& ruleset;
  std::string family_and_table;  // "inet filter "
};

bool range_holds_port(const json& range) {
  return range.is_array() && range.size() == 2 && range[0].is_number_integer() && range[1].is_number_integer() &&
         range[0].get<std::int64_t>() <= roce_v2_port && roce_v2_port <= range[1].get<std::int64_t>();
}

// Whether the right-hand side of a match (a port, a list, an anonymous or named set, a range,
// a set element) holds 4791. Depth-bounded: sets hold no sets, but the document is not ours.
bool holds_roce_port(const json& value, const Scope& scope, int depth = 0) {
  if (depth > 8) return false;
  const auto holds = [&](const json& inner) { return holds_roce_port(inner, scope, depth + 1); };
  if (value.is_number_integer()) return value.get<std::int64_t>() == roce_v2_port;
  if (value.is_array()) return std::any_of(value.begin(), value.end(), holds);
  if (value.is_string()) {
    const auto& name = value.get_ref<const std::string&>();
    if (!name.starts_with('@')) return false;
    const auto set = scope.ruleset.set_elements.find(scope.family_and_table + name.substr(1));
    return set != scope.ruleset.set_elements.end() && holds(*set->second);
  }
  if (const auto* set = member(value, "set")) return holds(*set);
  if (const auto* range = member(value, "range")) return range_holds_port(*range);
  if (const auto* element = member(value, "elem")) {
    const auto* inner = member(*element, "val");
    return inner != nullptr && holds(*inner);
  }
  return false;
}

bool compare_roce_port(const std::string& op, const json& right) {
  if (!right.is_number_integer()) return false;
  const auto value = right.get<std::int64_t>();
  if (op == "<") return roce_v2_port < value;
  if (op == "<=") return roce_v2_port <= value;
  if (op == ">") return roce_v2_port > value;
  if (op == ">=") return roce_v2_port >= value;
  return false;
}

// A match on a UDP (or transport-header) port, and whether a packet with that port 4791
// passes it.
struct PortTest {
  bool destination = false;
  bool admits_roce = false;
};

std::optional<PortTest> port_test(const json& match, const Scope& scope) {
  const auto* left = member(match, "left");
  const auto* payload = left != nullptr ? member(*left, "payload") : nullptr;
  const auto* right = member(match, "right");
  if (payload == nullptr || right == nullptr) return std::nullopt;
  const auto protocol = text_member(*payload, "protocol");
  const auto field = text_member(*payload, "field");
  if ((protocol != "udp" && protocol != "th") || (field != "dport" && field != "sport")) return std::nullopt;
  const auto op = text_member(match, "op");
  PortTest test{.destination = field == "dport", .admits_roce = false};
  if (op == "==" || op == "in") {
    test.admits_roce = holds_roce_port(*right, scope);
  } else if (op == "!=") {
    test.admits_roce = !holds_roce_port(*right, scope);
  } else {
    test.admits_roce = compare_roce_port(op, *right);
  }
  return test;
}

// A rule touches RoCE v2 when one of its UDP port matches admits 4791 and none of its
// destination-port matches turns it away ("udp dport != 4791" does not name the port).
bool touches_roce(const json& expressions, const Scope& scope) {
  bool admitted = false;
  for (const auto& expression : expressions) {
    const auto* match = member(expression, "match");
    const auto test = match != nullptr ? port_test(*match, scope) : std::nullopt;
    if (!test) continue;
    if (test->destination && !test->admits_roce) return false;
    admitted = admitted || test->admits_roce;
  }
  return admitted;
}

std::string verdict_of(const json& expressions) {
  std::string verdict;
  for (const auto& expression : expressions) {
    for (const char* name : {"accept", "drop", "reject"}) {
      if (member(expression, name) != nullptr) verdict = name;
    }
  }
  return verdict;
}

// ---- a rule's text, close to what `nft list` prints ----

std::string render_value(const json& value);

std::string joined(const json& list, const char* separator) {
  std::string text;
  for (const auto& item : list) {
    if (!text.empty()) text += separator;
    text += render_value(item);
  }
  return text;
}

std::string render_selector(const json& value) {
  if (const auto* payload = member(value, "payload")) {
    return text_member(*payload, "protocol") + " " + text_member(*payload, "field");
  }
  if (const auto* meta = member(value, "meta")) {
    const auto key = text_member(*meta, "key");
    const bool bare = key == "iifname" || key == "oifname" || key == "iif" || key == "oif" || key == "mark";
    return bare ? key : "meta " + key;
  }
  if (const auto* ct = member(value, "ct")) return "ct " + text_member(*ct, "key");
  if (!value.is_object() || value.empty()) return value.dump();
  return value.begin().key();
}

std::string render_value(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array()) return joined(value, ",");
  if (!value.is_object() || value.empty()) return value.dump();
  if (const auto* set = member(value, "set"))
    return "{ " + joined(set->is_array() ? *set : json::array({*set}), ", ") + " }";
  if (const auto* range = member(value, "range"); range != nullptr && range->is_array() && range->size() == 2) {
    return render_value((*range)[0]) + "-" + render_value((*range)[1]);
  }
  if (const auto* prefix = member(value, "prefix");
      prefix != nullptr && member(*prefix, "addr") && member(*prefix, "len")) {
    return render_value((*prefix)["addr"]) + "/" + render_value((*prefix)["len"]);
  }
  return render_selector(value);
}

std::string render_match(const json& match) {
  const auto* left = member(match, "left");
  const auto* right = member(match, "right");
  if (left == nullptr || right == nullptr) return "match";
  const auto op = text_member(match, "op");
  const auto selector = render_selector(*left);
  // Interface names are quoted, as nft prints them.
  const bool quoted = right->is_string() && selector.ends_with("name");
  const auto value = quoted ? "\"" + right->get<std::string>() + "\"" : render_value(*right);
  return selector + (op == "==" || op == "in" || op.empty() ? " " : " " + op + " ") + value;
}

std::string render_statement(const json& statement) {
  if (const auto* match = member(statement, "match")) return render_match(*match);
  if (!statement.is_object() || statement.empty()) return statement.dump();
  const auto& name = statement.begin().key();
  if (name == "jump" || name == "goto") return name + " " + text_member(statement.begin().value(), "target");
  return name;  // accept, drop, reject, counter, log, ...: their arguments are noise here
}

std::string render_rule(const json& expressions) {
  std::string text;
  for (const auto& statement : expressions) {
    if (!text.empty()) text += ' ';
    text += render_statement(statement);
  }
  return text.substr(0, max_text_bytes);
}

std::optional<FirewallRule> roce_rule(const json& rule, const Ruleset& ruleset) {
  const auto* expressions = member(rule, "expr");
  if (expressions == nullptr || !expressions->is_array()) return std::nullopt;
  const Scope scope{.ruleset = ruleset,
                    .family_and_table = text_member(rule, "family") + " " + text_member(rule, "table") + " "};
  if (!touches_roce(*expressions, scope)) return std::nullopt;
  const auto* handle = member(rule, "handle");
  const auto hook = ruleset.chain_hooks.find(qualified(rule, "chain"));
  return FirewallRule{.family = text_member(rule, "family"),
                      .table = text_member(rule, "table"),
                      .chain = text_member(rule, "chain"),
                      .hook = hook != ruleset.chain_hooks.end() ? hook->second : std::string{},
                      .handle = handle != nullptr && handle->is_number_integer() ? handle->get<std::int64_t>() : 0,
                      .verdict = verdict_of(*expressions),
                      .text = render_rule(*expressions)};
}

}  // namespace

HostView view_from(const Inventory& inventory) {
  HostView view;
  for (const auto& device : inventory.kernel_devices) {
    ViewDevice seen{.name = device.name, .netdev = netdev_of(device), .ports = {}, .driver = device.driver};
    for (const auto& port : device.ports) {
      seen.ports.push_back(ViewPort{.number = port.number,
                                    .state = port.state,
                                    .active_mtu = active_mtu(inventory, device.name, port.number),
                                    .link_layer = port.link_layer,
                                    .roce_mode = {},
                                    .gids = port.gids,
                                    .lid = port.lid,
                                    .sm_lid = port.sm_lid,
                                    .pkeys = port.pkeys});
    }
    view.devices.push_back(std::move(seen));
  }
  for (const auto& netdev : inventory.netdevs) {
    view.netdevs.push_back(ViewNetdev{.name = netdev.name,
                                      .up = netdev.up,
                                      .operstate = netdev.operstate,
                                      .mtu = netdev.mtu,
                                      .mac = {},
                                      .addresses = netdev.addresses,
                                      .rp_filter = -1,
                                      .pkey = netdev.pkey});
  }
  return view;
}

void read_net_files(const fs::path& proc_root, const fs::path& sys_root, const fs::path& configfs_root,
                    HostView& view) {
  const auto conf = proc_root / "sys" / "net" / "ipv4" / "conf";
  view.rp_filter_all = read_int(conf / "all" / "rp_filter");
  for (auto& netdev : view.netdevs) {
    netdev.rp_filter = read_int(conf / netdev.name / "rp_filter");
    netdev.mac = read_first_line(sys_root / "class" / "net" / netdev.name / "address").value_or("");
  }
  for (auto& device : view.devices) {
    for (auto& port : device.ports) {
      port.roce_mode = roce_mode_of(configfs_root, device.name, port);
    }
  }
}

Firewall firewall_from_nft_json(const json& ruleset) {
  Firewall firewall;
  const auto* objects = member(ruleset, "nftables");
  if (objects == nullptr || !objects->is_array()) {
    firewall.error = "not nftables JSON: no \"nftables\" list";
    return firewall;
  }
  firewall.readable = true;
  const auto index = index_ruleset(*objects);
  for (const auto& object : *objects) {
    const auto* chain = member(object, "chain");
    if (chain != nullptr && text_member(*chain, "policy") == "drop" &&
        firewall.drop_policy_chains.size() < max_list_entries) {
      firewall.drop_policy_chains.push_back(qualified(*chain, "name"));
    }
    const auto* rule = member(object, "rule");
    auto found = rule != nullptr ? roce_rule(*rule, index) : std::nullopt;
    if (found && firewall.rules.size() < max_list_entries) firewall.rules.push_back(std::move(*found));
  }
  return firewall;
}

}  // namespace rdmakit::diag
