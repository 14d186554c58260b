// JSON forms of the connect diagnoser's model: what --json writes, what fixtures hold, and
// the agent's answer as it comes off the network. One member list per struct serves both
// directions, so a member cannot be written and forgotten by the reader (or the reverse).

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/base/described_json.hpp"
#include "lib/base/error.hpp"
#include "lib/base/untrusted_json.hpp"
#include "lib/diag/connect_diagnosis.hpp"
#include "lib/diag/diag_json.hpp"

namespace rdmakit::diag {

namespace {

using described::Describes;

// diag-connect's description: the member lists (the JSON key is the member's name), and how
// its steps and statuses are written, read and shaped; the rest is DiagJson's.
struct ConnectJson : DiagJson {
  using DiagJson::leaf_shape;
  using DiagJson::read_leaf;
  using DiagJson::write_leaf;
  // Forwarded, not brought in by a using-declaration: clang 14 lets a derived abbreviated
  // template hide a base one whatever their constraints.
  static void members(Describes<GidEntry> auto& gid, auto&& visit) { DiagJson::members(gid, visit); }
  static void members(Describes<Verdict> auto& verdict, auto&& visit) { DiagJson::members(verdict, visit); }
  // The agent's answer comes off the network: its bounds (connect_diagnosis.hpp).
  static constexpr described::ReadLimits limits{.max_text_bytes = max_text_bytes, .max_list_entries = max_list_entries};

  static void members(Describes<ViewPort> auto& port, auto&& visit) {
    visit("number", port.number);
    visit("state", port.state);
    visit("active_mtu", port.active_mtu);
    visit("link_layer", port.link_layer);
    visit("roce_mode", port.roce_mode);
    visit("gids", port.gids);
    visit("lid", port.lid);
    visit("sm_lid", port.sm_lid);
    visit("pkeys", port.pkeys);
  }

  static void members(Describes<ViewDevice> auto& device, auto&& visit) {
    visit("name", device.name);
    visit("netdev", device.netdev);
    visit("ports", device.ports);
    visit("driver", device.driver);
  }

  static void members(Describes<ViewNetdev> auto& netdev, auto&& visit) {
    visit("name", netdev.name);
    visit("up", netdev.up);
    visit("operstate", netdev.operstate);
    visit("mtu", netdev.mtu);
    visit("mac", netdev.mac);
    visit("addresses", netdev.addresses);
    visit("rp_filter", netdev.rp_filter);
    visit("pkey", netdev.pkey);
  }

  static void members(Describes<FirewallRule> auto& rule, auto&& visit) {
    visit("family", rule.family);
    visit("table", rule.table);
    visit("chain", rule.chain);
    visit("hook", rule.hook);
    visit("handle", rule.handle);
    visit("verdict", rule.verdict);
    visit("text", rule.text);
  }

  static void members(Describes<Firewall> auto& firewall, auto&& visit) {
    visit("readable", firewall.readable);
    visit("error", firewall.error);
    visit("rules", firewall.rules);
    visit("drop_policy_chains", firewall.drop_policy_chains);
  }

  static void members(Describes<CmListener> auto& listener, auto&& visit) {
    visit("port", listener.port);
    visit("port_space", listener.port_space);
    visit("address", listener.address);
    visit("device", listener.device);
  }

  static void members(Describes<Neighbour> auto& neighbour, auto&& visit) {
    visit("address", neighbour.address);
    visit("netdev", neighbour.netdev);
    visit("state", neighbour.state);
    visit("lladdr", neighbour.lladdr);
  }

  static void members(Describes<RouteInfo> auto& route, auto&& visit) {
    visit("destination", route.destination);
    visit("netdev", route.netdev);
    visit("source", route.source);
    visit("gateway", route.gateway);
    visit("errnum", route.errnum);
  }

  static void members(Describes<HostView> auto& view, auto&& visit) {
    visit("host_name", view.host_name);
    visit("devices", view.devices);
    visit("netdevs", view.netdevs);
    visit("rp_filter_all", view.rp_filter_all);
    visit("firewall", view.firewall);
    visit("listeners_known", view.listeners_known);
    visit("listeners", view.listeners);
    visit("route", view.route);
    visit("neighbour", view.neighbour);
  }

  static void members(Describes<ConnectStep> auto& step, auto&& visit) {
    visit("name", step.name);
    visit("status", step.status);
    visit("errnum", step.errnum);
    visit("event", step.event);
    visit("detail", step.detail);
    visit("ms", step.ms);
  }

  static void members(Describes<Rejection> auto& rejection, auto&& visit) {
    visit("reason", rejection.reason);
    visit("reason_text", rejection.reason_text);
    visit("consumer", rejection.consumer);
    visit("private_data", rejection.private_data);
  }

  static void members(Describes<DataCheck> auto& check, auto&& visit) {
    visit("operation", check.operation);
    visit("bytes", check.bytes);
    visit("status", check.status);
    visit("detail", check.detail);
    visit("us", check.us);
  }

  static void members(Describes<ConnectAttempt> auto& attempt, auto&& visit) {
    visit("target", attempt.target);
    visit("port", attempt.port);
    visit("port_space", attempt.port_space);
    visit("bind", attempt.bind);
    visit("gid_index", attempt.gid_index);
    visit("steps", attempt.steps);
    visit("source_address", attempt.source_address);
    visit("source_netdev", attempt.source_netdev);
    visit("device", attempt.device);
    visit("device_port", attempt.device_port);
    visit("source_gid", attempt.source_gid);
    visit("gid_type", attempt.gid_type);
    visit("path_mtu", attempt.path_mtu);
    visit("rejection", attempt.rejection);
    visit("peer_is_agent", attempt.peer_is_agent);
    visit("data", attempt.data);
  }

  static void members(Describes<AgentContact> auto& agent, auto&& visit) {
    visit("address", agent.address);
    visit("status", agent.status);
    visit("detail", agent.detail);
    visit("ms", agent.ms);
  }

  static void members(Describes<PeerAnswer> auto& answer, auto&& visit) {
    visit("version", answer.version);
    visit("view", answer.view);
    visit("client_address", answer.client_address);
    visit("serving", answer.serving);
    visit("serving_port", answer.serving_port);
    visit("serving_port_space", answer.serving_port_space);
    visit("serving_address", answer.serving_address);
  }

  static void members(Describes<ConnectCase> auto& connect_case, auto&& visit) {
    visit("attempt", connect_case.attempt);
    visit("local", connect_case.local);
    visit("agent", connect_case.agent);
    visit("peer", connect_case.peer);
    visit("host", connect_case.host);
  }

  static void members(Describes<ConnectVerdict> auto& verdict, auto&& visit) {
    visit("cause", verdict.cause);
    visit("exit_code", verdict.exit_code);
    visit("summary", verdict.summary);
    visit("evidence", verdict.evidence);
    visit("fix", verdict.fix);
    visit("fix_host", verdict.fix_host);
    visit("next", verdict.next);
    visit("candidates", verdict.candidates);
    visit("warnings", verdict.warnings);
  }

  static nlohmann::json write_leaf(rdmakit::Step step) { return step_name(step); }
  static void read_leaf(const nlohmann::json& json, const described::Path& path, rdmakit::Step& out) {
    std::string name;
    described::read_text(json, path, name, limits);
    const auto step = step_named(name);
    if (!step) described::reject(path, fmt::format("'{}' is no step rdmakit times", name));
    out = *step;
  }
  static nlohmann::json leaf_shape(const rdmakit::Step* /*kind*/) {
    std::vector<std::string_view> names;
    for (auto step = 0; step <= static_cast<int>(rdmakit::Step::transfer); ++step) {
      names.push_back(step_name(static_cast<rdmakit::Step>(step)));
    }
    return described::named_shape(names);
  }

  static nlohmann::json write_leaf(StepStatus status) { return to_string(status); }
  static void read_leaf(const nlohmann::json& json, const described::Path& path, StepStatus& out) {
    described::read_named(json, path, out, step_status_named, step_status_names());
  }
  static nlohmann::json leaf_shape(const StepStatus* /*kind*/) { return described::named_shape(step_status_names()); }

  static nlohmann::json write_leaf(AgentStatus status) { return to_string(status); }
  static void read_leaf(const nlohmann::json& json, const described::Path& path, AgentStatus& out) {
    described::read_named(json, path, out, agent_status_named, agent_status_names());
  }
  static nlohmann::json leaf_shape(const AgentStatus* /*kind*/) { return described::named_shape(agent_status_names()); }
};

template <typename Value>
nlohmann::json write(const Value& value) {
  return described::write<ConnectJson>(value);
}

template <typename Value>
Value read_document(const nlohmann::json& document) {
  return described::read_document<ConnectJson, Value>(document);
}

// Deeper than any real view: refused before parsing (lib/base/untrusted_json).
constexpr std::size_t max_answer_depth = 32;

}  // namespace

nlohmann::json to_json(const HostView& view) {
  return write(view);
}
nlohmann::json to_json(const ConnectAttempt& attempt) {
  return write(attempt);
}
nlohmann::json to_json(const PeerAnswer& answer) {
  return write(answer);
}
nlohmann::json to_json(const ConnectCase& connect_case) {
  return write(connect_case);
}
nlohmann::json to_json(const ConnectVerdict& verdict) {
  return write(verdict);
}

HostView host_view_from_json(const nlohmann::json& document) {
  return read_document<HostView>(document);
}
PeerAnswer peer_answer_from_json(const nlohmann::json& document) {
  return read_document<PeerAnswer>(document);
}
ConnectCase connect_case_from_json(const nlohmann::json& document) {
  return read_document<ConnectCase>(document);
}
ConnectAttempt connect_attempt_from_json(const nlohmann::json& document) {
  return read_document<ConnectAttempt>(document);
}
ConnectVerdict connect_verdict_from_json(const nlohmann::json& document) {
  return read_document<ConnectVerdict>(document);
}

std::vector<described::SchemaShape> connect_json_shapes() {
  using described::shape;
  const auto local = [](const char* name, nlohmann::json form) {
    return described::SchemaShape{
        .schema = "diag-connect", .pointer = std::string("/$defs/") + name, .shape = form, .extra_keys = {}};
  };
  const auto common = [](const char* name, nlohmann::json form) {
    return described::SchemaShape{
        .schema = "common", .pointer = std::string("/$defs/") + name, .shape = form, .extra_keys = {}};
  };
  return {common("gid_entry", shape<ConnectJson, GidEntry>()),
          local("view_port", shape<ConnectJson, ViewPort>()),
          local("view_device", shape<ConnectJson, ViewDevice>()),
          local("view_netdev", shape<ConnectJson, ViewNetdev>()),
          local("firewall_rule", shape<ConnectJson, FirewallRule>()),
          local("firewall", shape<ConnectJson, Firewall>()),
          local("cm_listener", shape<ConnectJson, CmListener>()),
          local("neighbour", shape<ConnectJson, Neighbour>()),
          local("route", shape<ConnectJson, RouteInfo>()),
          local("host_view", shape<ConnectJson, HostView>()),
          local("step", shape<ConnectJson, ConnectStep>()),
          local("rejection", shape<ConnectJson, Rejection>()),
          local("data_check", shape<ConnectJson, DataCheck>()),
          local("attempt", shape<ConnectJson, ConnectAttempt>()),
          local("agent_contact", shape<ConnectJson, AgentContact>()),
          local("peer_answer", shape<ConnectJson, PeerAnswer>()),
          local("connect_case", shape<ConnectJson, ConnectCase>()),
          common("verdict", shape<ConnectJson, Verdict>()),
          local("verdict", shape<ConnectJson, ConnectVerdict>())};
}

PeerAnswer parse_peer_answer(std::string_view bytes) {
  if (bytes.size() > max_answer_bytes) {
    throw ProtocolError(
        fmt::format("the agent's answer is {} bytes, more than the {} allowed", bytes.size(), max_answer_bytes));
  }
  const auto document = parse_untrusted_json(bytes, max_answer_depth, "the agent's answer");
  auto answer = peer_answer_from_json(document);
  if (answer.version < 1) throw ProtocolError(fmt::format("version: {} is no agent protocol version", answer.version));
  return answer;
}

}  // namespace rdmakit::diag
