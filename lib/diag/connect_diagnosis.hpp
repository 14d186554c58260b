#pragma once
// The connect diagnoser (diag-connect): both hosts' views of the path between them, the
// record of a real connection attempt from the client side, and the pure function that
// turns them into a verdict. Nothing here touches a device or the network: the live facts
// come from the live host (host_view, connect_probe, connect_agent), the test facts from
// fixtures (tests/fixtures/connect/*.json, read with from_json).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/described_json.hpp"
#include "lib/base/error.hpp"
#include "lib/base/sibling_names.hpp"
#include "lib/base/step.hpp"
#include "lib/diag/diagnosis.hpp"
#include "lib/rdma/gid.hpp"

namespace rdmakit::diag {

// ---- One host's view: what the client reads of itself and what the agent answers ----

struct ViewPort {
  int number = 0;
  std::string state;       // "ACTIVE", "DOWN", ...
  int active_mtu = 0;      // bytes (256 ... 4096), 0 unknown
  std::string link_layer;  // "Ethernet", "InfiniBand"
  // rdma_cm's default GID type for this port (configfs default_roce_mode): "RoCE v2" (the
  // kernel's default when configfs holds no entry) or "IB/RoCE v1"; "" for InfiniBand.
  std::string roce_mode;
  std::vector<GidEntry> gids;
  // InfiniBand: as KernelPort's (lib/diag/diagnosis.hpp); -1 and none elsewhere, or from an
  // older agent.
  int lid = -1;
  int sm_lid = -1;
  std::vector<std::uint16_t> pkeys;
};

struct ViewDevice {
  std::string name;
  std::string netdev;  // soft-RoCE / RoCE: the netdev it serves, "" when unknown
  std::vector<ViewPort> ports;
  // The kernel driver ("rdma_rxe", "siw", "mlx5_core"), "" when unknown (an older agent).
  std::string driver;
};

// Whether the host's own network stack carries the device's RoCE packets, so that its
// firewall and rp_filter act on them: true for the software devices (rxe, siw), false for a
// hardware NIC, whose RoCE traffic never meets nftables; true when the driver is unknown.
bool kernel_sees_roce(const ViewDevice* device);

// Whether the port is an iWARP RNIC's: its GIDs are typed "iWARP" (lib/diag/sysfs.cpp).
bool is_iwarp_port(const ViewPort& port);

struct ViewNetdev {
  std::string name;
  bool up = false;  // IFF_UP
  std::string operstate;
  int mtu = 0;
  std::string mac;                     // "52:54:00:57:00:01"
  std::vector<std::string> addresses;  // "10.57.0.1/24"
  int rp_filter = -1;                  // net.ipv4.conf.<netdev>.rp_filter, -1 unreadable
  int pkey = -1;                       // an IPoIB netdev's P_Key, -1 for any other (or an older agent)
};

// A firewall rule that can touch RoCE v2 (UDP 4791), as read from the nftables ruleset.
struct FirewallRule {
  std::string family;  // "inet", "ip", "ip6", ...
  std::string table;
  std::string chain;
  std::string hook;  // "input", "output", "forward", "" for a regular chain
  std::int64_t handle = 0;
  std::string verdict;  // "drop", "reject", "accept", "" (a match without a verdict)
  std::string text;     // the rule as nft prints it
};

struct Firewall {
  bool readable = false;
  std::string error;                // why not readable ("no permission", "nftables not available")
  std::vector<FirewallRule> rules;  // rules that name UDP port 4791 (or a set holding it)
  // Base chains whose policy is drop: everything not accepted dies there.
  std::vector<std::string> drop_policy_chains;  // "inet filter input"
};

// An rdma_cm id in LISTEN state (RDMA netlink's cm_id dump).
struct CmListener {
  std::uint16_t port = 0;
  std::string port_space;  // "tcp", "udp", "ib", "ipoib"
  std::string address;     // "0.0.0.0", "10.57.0.1"
  std::string device;      // "" when bound to no device (wildcard)
  std::uint32_t pid = 0;   // the process that listens, on this host only (not in the JSON)
};

struct Neighbour {
  std::string address;
  std::string netdev;
  std::string state;   // "REACHABLE", "STALE", "DELAY", "PROBE", "INCOMPLETE", "FAILED", "PERMANENT", "NOARP", "none"
  std::string lladdr;  // "" when none
};

// What `ip route get DESTINATION [from SOURCE]` answers.
struct RouteInfo {
  std::string destination;
  std::string netdev;   // the output netdev, "" when there is no route
  std::string source;   // the preferred source address
  std::string gateway;  // "" when on-link
  int errnum = 0;       // ENETUNREACH, EHOSTUNREACH, ... when there is no route
};

struct HostView {
  std::string host_name;
  std::vector<ViewDevice> devices;
  std::vector<ViewNetdev> netdevs;
  int rp_filter_all = -1;  // net.ipv4.conf.all.rp_filter; the kernel uses max(all, netdev)
  Firewall firewall;
  bool listeners_known = false;  // false: the cm_id dump was not readable
  std::vector<CmListener> listeners;
  // The client: the route to the target and the target's (or gateway's) neighbour entry.
  // The agent: the route back to the client's source address and the client's entry.
  std::optional<RouteInfo> route;
  std::optional<Neighbour> neighbour;
};

// ---- The client's attempt ----

// How a step of the attempt or a data check ended: skipped when an earlier one failed,
// interrupted by Ctrl-C or SIGTERM. The names are the report's (connect_status.cpp holds the
// one table; the schema's enum is checked against it).
enum class StepStatus { ok, failed, timeout, skipped, interrupted };
std::string_view to_string(StepStatus status);
std::optional<StepStatus> step_status_named(std::string_view name);
std::span<const std::string_view> step_status_names();

// How the TCP side channel to the agent went (the schema's description says what each means).
enum class AgentStatus {
  ok,
  refused,
  timeout,
  unreachable,
  invalid,
  unauthenticated,
  tampered,
  failed,
  interrupted,
  not_tried
};
std::string_view to_string(AgentStatus status);
std::optional<AgentStatus> agent_status_named(std::string_view name);
std::span<const std::string_view> agent_status_names();

// One step of the attempt, timed: route (the kernel's source), resolve_addr, resolve_route,
// connect, disconnect; agent (the TCP side channel) in captures of older versions.
struct ConnectStep {
  rdmakit::Step name = rdmakit::Step::route;
  StepStatus status = StepStatus::ok;
  int errnum = 0;     // the errno the call or its event reported, 0 when none
  std::string event;  // the CM event that ended it ("RDMA_CM_EVENT_ADDR_ERROR"), "" when none
  std::string detail;
  double ms = 0;
};

// A REJECTED connect: the IB CM reason and what the rejecting side said.
struct Rejection {
  int reason = 0;            // IB CM reject reason (8 invalid service id: nothing listens; 28 consumer defined)
  std::string reason_text;   // rdma_reject_msg()
  bool consumer = false;     // rejected by the application (rdma_reject), with private data
  std::string private_data;  // printable text of what the application sent, "" when none
};

// One bounded transfer of the data check after the connection came up.
struct DataCheck {
  std::string operation;  // "send", "write", "read"
  std::size_t bytes = 0;
  StepStatus status = StepStatus::ok;
  std::string detail;  // the completion status ("transport retry counter exceeded"), or why skipped
  double us = 0;
};

struct ConnectAttempt {
  std::string target;  // numeric address probed
  std::uint16_t port = 0;
  std::string port_space = "tcp";
  std::string bind;  // the source address asked for, "" for the kernel's choice
  // --gid-index: the GID index another stack is given (perftest -x, NCCL_IB_GID_INDEX,
  // UCX_IB_GID_INDEX), checked on both hosts; none when not asked. rdma_cm takes the GID from
  // the address, so the attempt itself works whatever this index holds.
  std::optional<std::uint32_t> gid_index;
  std::vector<ConnectStep> steps;
  // What address resolution chose (empty/0 when it failed).
  std::string source_address;
  std::string source_netdev;
  std::string device;
  int device_port = 0;
  std::string source_gid;
  std::string gid_type;  // "RoCE v2", "RoCE v1", "IB"
  int path_mtu = 0;      // bytes, after route resolution
  std::optional<Rejection> rejection;
  bool peer_is_agent = false;  // the accept carried a diag-connect agent's offer
  std::vector<DataCheck> data;
  const ConnectStep* find(rdmakit::Step step) const;
};

// How the TCP side channel to the agent went.
struct AgentContact {
  std::string address;  // where the agent was asked (host:port)
  AgentStatus status = AgentStatus::not_tried;
  std::string detail;  // why invalid (too large, not JSON, wrong member), or the errno text
  double ms = 0;
};

// The agent's answer: its view, and what it knows of the probed port.
struct PeerAnswer {
  int version = 1;
  HostView view;
  std::string client_address;  // the client's address as the agent's TCP socket saw it
  // The agent's own rdma_cm listener (every agent listens, unless started with --no-listen).
  bool serving = false;
  std::uint16_t serving_port = 0;
  std::string serving_port_space;
  std::string serving_address;  // "0.0.0.0" or the --bind address
};

// Everything the verdict needs; what --json records under "capture" and what fixtures hold.
struct ConnectCase {
  ConnectAttempt attempt;
  HostView local;
  AgentContact agent;
  std::optional<PeerAnswer> peer;
  // diag-bind's verdict on this host for the address (the target, or --bind), taken when
  // address or route resolution failed: where the host itself cannot do RDMA (no device, no
  // rdma_cm, a loopback or own address without RDMA), that is the verdict, whichever tool asks.
  std::optional<Verdict> host;
  // How the verdict's next steps name diag-bind and diag-connect (the report's).
  SiblingNames siblings;
};

struct ConnectVerdict {
  ConnectCause cause = "unknown";              // stable code (man/diag-connect.1): "ok", "no_listener", ...
  ExitCode exit_code = ExitCode::unexplained;  // ok 0, cause_found 1, unexplained 3
  std::string summary;                         // one line
  std::vector<std::string> evidence;           // the facts that name the cause, both sides'
  // A command that fixes it, names filled in; "" where none does or the operator must choose.
  std::string fix;
  std::string fix_host;  // "client", "server", "both" or "": where the fix runs
  std::string next;      // the next step where `fix` is not the whole answer: a check, a choice
  // Without the agent (or with too little from it): the causes the facts fit and could not
  // be told apart, most likely first.
  std::vector<std::string> candidates;
  std::vector<std::string> warnings;  // differences that did not stop this run (MTU, GID type)
};

// The causes, in the order the verdict tests them.
// gid_link_local, gid_index_mismatch (with --gid-index, the connection having worked), ok,
// source_not_rdma, no_route, neighbour_unresolved, neighbour_wrong, wrong_port_space,
// no_listener, rejected_by_application, peer_not_rdma, peer_port_down, firewall_roce,
// rp_filter, roce_mode_mismatch, mtu_mismatch, no_rdma_answer (no agent, connect unanswered: the
// candidates listed), unknown. The rule of each: the table atop lib/diag/connect_verdict.cpp.
ConnectVerdict diagnose_connect(const ConnectCase& connect_case);

std::string render_connect_text(const ConnectCase& connect_case, const ConnectVerdict& verdict);
// The verdict's "fix (on the server): ..." and "next: ..." lines, each indented by two.
std::string render_remedy(const ConnectVerdict& verdict);

// ---- JSON: the report, the fixtures and the agent's answer ----

nlohmann::json to_json(const HostView& view);
nlohmann::json to_json(const ConnectAttempt& attempt);
nlohmann::json to_json(const PeerAnswer& answer);
nlohmann::json to_json(const ConnectCase& connect_case);
nlohmann::json to_json(const ConnectVerdict& verdict);

// Strict readers (lib/base/described_json.hpp): a member of the wrong JSON type, a number
// out of range, a string or list beyond the bounds below throws ProtocolError naming the
// member. Missing members keep their defaults (captures and agents of older versions).
HostView host_view_from_json(const nlohmann::json& document);
PeerAnswer peer_answer_from_json(const nlohmann::json& document);
ConnectCase connect_case_from_json(const nlohmann::json& document);
ConnectAttempt connect_attempt_from_json(const nlohmann::json& document);
ConnectVerdict connect_verdict_from_json(const nlohmann::json& document);  // reports read back, tests
// Each described struct's shape and its schema definition (tests/unit/described_json_test.cpp).
std::vector<described::SchemaShape> connect_json_shapes();

// The agent's answer as received: at most max_answer_bytes of JSON. Never trusts it:
// anything that does not parse or fit throws ProtocolError saying what.
constexpr std::size_t max_answer_bytes = std::size_t{256} * 1024;
constexpr std::size_t max_list_entries = 512;  // devices, netdevs, GIDs, rules, listeners each
constexpr std::size_t max_text_bytes = 1024;   // any one string
PeerAnswer parse_peer_answer(std::string_view bytes);

}  // namespace rdmakit::diag
