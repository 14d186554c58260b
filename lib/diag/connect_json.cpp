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

#include "lib/base/error.hpp"
#include "lib/base/untrusted_json.hpp"
#include "lib/diag/connect_diagnosis.hpp"

namespace rdmakit::diag {

namespace {

template <typename Object, typename Model>
concept Describes = std::same_as<std::remove_const_t<Object>, Model>;

// The member lists: the JSON key is the member's name.

void members(Describes<GidEntry> auto& gid, auto&& visit) {
  visit("index", gid.index);
  visit("gid", gid.gid);
  visit("type", gid.type);
  visit("netdev", gid.netdev);
}

void members(Describes<ViewPort> auto& port, auto&& visit) {
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

void members(Describes<ViewDevice> auto& device, auto&& visit) {
  visit("name", device.name);
  visit("netdev", device.netdev);
  visit("ports", device.ports);
  visit("driver", device.driver);
}

void members(Describes<ViewNetdev> auto& netdev, auto&& visit) {
  visit("name", netdev.name);
  visit("up", netdev.up);
  visit("operstate", netdev.operstate);
  visit("mtu", netdev.mtu);
  visit("mac", netdev.mac);
  visit("addresses", netdev.addresses);
  visit("rp_filter", netdev.rp_filter);
  visit("pkey", netdev.pkey);
}

void members(Describes<FirewallRule> auto& rule, auto&& visit) {
  visit("family", rule.family);
  visit("table", rule.table);
  visit("chain", rule.chain);
  visit("hook", rule.hook);
  visit("handle", rule.handle);
  visit("verdict", rule.verdict);
  visit("text", rule.text);
}

void members(Describes<Firewall> auto& firewall, auto&& visit) {
  visit("readable", firewall.readable);
  visit("error", firewall.error);
  visit("rules", firewall.rules);
  visit("drop_policy_chains", firewall.drop_policy_chains);
}

void members(Describes<CmListener> auto& listener, auto&& visit) {
  visit("port", listener.port);
  visit("port_space", listener.port_space);
  visit("address", listener.address);
  visit("device", listener.device);
}

void members(Describes<Neighbour> auto& neighbour, auto&& visit) {
  visit("address", neighbour.address);
  visit("netdev", neighbour.netdev);
  visit("state", neighbour.state);
  visit("lladdr", neighbour.lladdr);
}

void members(Describes<RouteInfo> auto& route, auto&& visit) {
  visit("destination", route.destination);
  visit("netdev", route.netdev);
  visit("source", route.source);
  visit("gateway", route.gateway);
  visit("errnum", route.errnum);
}

void members(Describes<HostView> auto& view, auto&& visit) {
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

void members(Describes<ConnectStep> auto& step, auto&& visit) {
  visit("name", step.name);
  visit("status", step.status);
  visit("errnum", step.errnum);
  visit("event", step.event);
  visit("detail", step.detail);
  visit("ms", step.ms);
}

void members(Describes<Rejection> auto& rejection, auto&& visit) {
  visit("reason", rejection.reason);
  visit("reason_text", rejection.reason_text);
  visit("consumer", rejection.consumer);
  visit("private_data", rejection.private_data);
}

void members(Describes<DataCheck> auto& check, auto&& visit) {
  visit("operation", check.operation);
  visit("bytes", check.bytes);
  visit("status", check.status);
  visit("detail", check.detail);
  visit("us", check.us);
}

void members(Describes<ConnectAttempt> auto& attempt, auto&& visit) {
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

void members(Describes<AgentContact> auto& agent, auto&& visit) {
  visit("address", agent.address);
  visit("status", agent.status);
  visit("detail", agent.detail);
  visit("ms", agent.ms);
}

void members(Describes<PeerAnswer> auto& answer, auto&& visit) {
  visit("version", answer.version);
  visit("view", answer.view);
  visit("client_address", answer.client_address);
  visit("serving", answer.serving);
  visit("serving_port", answer.serving_port);
  visit("serving_port_space", answer.serving_port_space);
  visit("serving_address", answer.serving_address);
}

void members(Describes<ConnectCase> auto& connect_case, auto&& visit) {
  visit("attempt", connect_case.attempt);
  visit("local", connect_case.local);
  visit("agent", connect_case.agent);
  visit("peer", connect_case.peer);
  visit("host", connect_case.host);
}

void members(Describes<Verdict> auto& verdict, auto&& visit) {
  visit("cause", verdict.cause);
  visit("exit_code", verdict.exit_code);
  visit("summary", verdict.summary);
  visit("fix", verdict.fix);
  visit("next", verdict.next);
  visit("details", verdict.details);
  visit("warnings", verdict.warnings);
}

void members(Describes<ConnectVerdict> auto& verdict, auto&& visit) {
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

template <typename Value>
concept Described = requires(const Value& value) {
  members(value, [](const char*, const auto&) {});
};

template <typename Value>
struct IsVector : std::false_type {};
template <typename Item>
struct IsVector<std::vector<Item>> : std::true_type {};

template <typename Value>
struct IsOptional : std::false_type {};
template <typename Item>
struct IsOptional<std::optional<Item>> : std::true_type {};

template <typename Value>
struct IsCause : std::false_type {};
template <const auto& table>
struct IsCause<Cause<table>> : std::true_type {};

template <typename Value>
nlohmann::json write(const Value& value) {
  if constexpr (Described<Value>) {
    nlohmann::json object = nlohmann::json::object();
    members(value, [&object](const char* key, const auto& member) { object[key] = write(member); });
    return object;
  } else if constexpr (IsVector<Value>::value) {
    nlohmann::json array = nlohmann::json::array();
    for (const auto& item : value) array.push_back(write(item));
    return array;
  } else if constexpr (IsOptional<Value>::value) {
    return value ? write(*value) : nlohmann::json(nullptr);
  } else if constexpr (std::is_same_v<Value, ExitCode>) {
    return static_cast<int>(value);
  } else if constexpr (IsCause<Value>::value) {
    return value.name();
  } else if constexpr (std::is_same_v<Value, rdmakit::Step>) {
    return step_name(value);
  } else if constexpr (std::is_same_v<Value, StepStatus> || std::is_same_v<Value, AgentStatus>) {
    return to_string(value);
  } else {
    return value;
  }
}

// The strict reader. `path` names the member for messages: "peer.view.netdevs[2].mtu".

[[noreturn]] void reject(const std::string& path, std::string_view what) {
  throw ProtocolError(fmt::format("{}: {}", path.empty() ? "the document" : path, what));
}

// A tab may appear in a rule's text; any other control character would reach the terminal
// that prints the verdict.
bool printable(const std::string& text) {
  return std::ranges::none_of(text, [](const unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; });
}

template <typename Value>
void read(const nlohmann::json& json, const std::string& path, Value& out);

template <std::integral Integer>
void read_integer(const nlohmann::json& json, const std::string& path, Integer& out) {
  if (!json.is_number_integer()) reject(path, "expected an integer");
  const bool fits = json.is_number_unsigned() ? std::in_range<Integer>(json.get<std::uint64_t>())
                                              : std::in_range<Integer>(json.get<std::int64_t>());
  if (!fits) reject(path, fmt::format("{} is out of range", json.dump()));
  out = json.is_number_unsigned() ? static_cast<Integer>(json.get<std::uint64_t>())
                                  : static_cast<Integer>(json.get<std::int64_t>());
}

void read_text(const nlohmann::json& json, const std::string& path, std::string& out) {
  if (!json.is_string()) reject(path, "expected a string");
  const auto& text = json.get_ref<const std::string&>();
  if (text.size() > max_text_bytes) {
    reject(path, fmt::format("{} bytes, more than the {} allowed", text.size(), max_text_bytes));
  }
  if (!printable(text)) reject(path, "holds a control character");
  out = text;
}

void read_exit_code(const nlohmann::json& json, const std::string& path, ExitCode& out) {
  int code = 0;
  read_integer(json, path, code);
  if (code != static_cast<int>(ExitCode::ok) && code != static_cast<int>(ExitCode::cause_found) &&
      code != static_cast<int>(ExitCode::unexplained)) {
    reject(path, fmt::format("{} is no verdict's exit code (0, 1 or 3)", code));
  }
  out = static_cast<ExitCode>(code);
}

void read_step(const nlohmann::json& json, const std::string& path, rdmakit::Step& out) {
  std::string name;
  read_text(json, path, name);
  const auto step = step_named(name);
  if (!step) reject(path, fmt::format("'{}' is no step rdmakit times", name));
  out = *step;
}

// One of a table's names: `named` finds it, `names` lists them for the message.
template <typename Value>
void read_named(const nlohmann::json& json, const std::string& path, Value& out,
                std::optional<Value> (*named)(std::string_view), const auto& names) {
  std::string name;
  read_text(json, path, name);
  const auto value = named(name);
  if (!value) reject(path, fmt::format("'{}' is not one of {}", name, fmt::join(names, ", ")));
  out = *value;
}

// A status is one of its table's names (connect_status.cpp), a cause one of its
// diagnoser's (causes.hpp).
void read_status(const nlohmann::json& json, const std::string& path, StepStatus& out) {
  read_named(json, path, out, step_status_named, step_status_names());
}
void read_status(const nlohmann::json& json, const std::string& path, AgentStatus& out) {
  read_named(json, path, out, agent_status_named, agent_status_names());
}
template <const auto& table>
void read_cause(const nlohmann::json& json, const std::string& path, Cause<table>& out) {
  read_named(json, path, out, Cause<table>::named, table);
}

template <typename Item>
void read_list(const nlohmann::json& json, const std::string& path, std::vector<Item>& out) {
  if (!json.is_array()) reject(path, "expected an array");
  if (json.size() > max_list_entries) {
    reject(path, fmt::format("{} entries, more than the {} allowed", json.size(), max_list_entries));
  }
  out.clear();
  out.resize(json.size());
  for (std::size_t i = 0; i < json.size(); ++i) read(json[i], fmt::format("{}[{}]", path, i), out[i]);
}

template <typename Value>
void read_object(const nlohmann::json& json, const std::string& path, Value& out) {
  if (!json.is_object()) reject(path, "expected an object");
  members(out, [&json, &path](const char* key, auto& member) {
    const auto it = json.find(key);
    if (it != json.end()) read(*it, path.empty() ? std::string(key) : path + "." + key, member);
  });
}

template <typename Value>
void read(const nlohmann::json& json, const std::string& path, Value& out) {
  if constexpr (Described<Value>) {
    read_object(json, path, out);
  } else if constexpr (IsVector<Value>::value) {
    read_list(json, path, out);
  } else if constexpr (IsOptional<Value>::value) {
    if (json.is_null()) {
      out.reset();
    } else {
      read(json, path, out.emplace());
    }
  } else if constexpr (std::is_same_v<Value, std::string>) {
    read_text(json, path, out);
  } else if constexpr (std::is_same_v<Value, StepStatus> || std::is_same_v<Value, AgentStatus>) {
    read_status(json, path, out);
  } else if constexpr (IsCause<Value>::value) {
    read_cause(json, path, out);
  } else if constexpr (std::is_same_v<Value, bool>) {
    if (!json.is_boolean()) reject(path, "expected true or false");
    out = json.get<bool>();
  } else if constexpr (std::is_same_v<Value, double>) {
    if (!json.is_number()) reject(path, "expected a number");
    out = json.get<double>();
  } else if constexpr (std::is_same_v<Value, ExitCode>) {
    read_exit_code(json, path, out);
  } else if constexpr (std::is_same_v<Value, rdmakit::Step>) {
    read_step(json, path, out);
  } else {
    read_integer(json, path, out);
  }
}

// Every reader's entry: nlohmann's own exceptions (none expected past the type checks
// above) become ProtocolError too, so that a caller has one type to catch.
template <typename Value>
Value read_document(const nlohmann::json& document) {
  Value value;
  try {
    read(document, "", value);
  } catch (const nlohmann::json::exception& error) {
    throw ProtocolError(std::string("unexpected JSON: ") + error.what());
  }
  return value;
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
