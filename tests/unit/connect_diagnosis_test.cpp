// The connect diagnoser fed from fixtures (tests/fixtures/connect: one ConnectCase per cause,
// both hosts' views), its JSON forms and their strict readers, and single-fact edits that show
// what each rule looks at.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <ostream>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/error.hpp"
#include "lib/diag/connect_diagnosis.hpp"
#include "tests/unit/refusal.hpp"

namespace rdmakit::diag {
namespace {

namespace fs = std::filesystem;

const fs::path connect_fixtures = RDMAKIT_CONNECT_FIXTURES;

nlohmann::json fixture_json(const std::string& name) {
  std::ifstream in(connect_fixtures / (name + ".json"));
  EXPECT_TRUE(in) << name;
  return nlohmann::json::parse(in);
}

ConnectCase fixture(const std::string& name) {
  return connect_case_from_json(fixture_json(name));
}

bool mentions(const ConnectVerdict& v, const std::string& text) {
  for (const auto* field : {&v.summary, &v.fix, &v.next}) {
    if (field->find(text) != std::string::npos) return true;
  }
  for (const auto& line : v.evidence) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

struct ConnectExpectation {
  const char* fixture;
  const char* cause;
  int exit_code;
  const char* fix_host;
  const char* must_mention;  // in summary, fix, next or evidence
};

const ConnectExpectation connect_expectations[] = {
    {"ok", "ok", 0, "", "path MTU 1024"},
    {"source_not_rdma", "source_not_rdma", 1, "client", "ip route add 10.57.0.1/32 dev eth0 src 10.57.0.2"},
    {"no_route", "no_route", 1, "client", "ip route add 10.99.0.1/32 dev eth0"},
    {"no_route-netdev_down", "no_route", 1, "client", "ip link set eth0 up"},
    {"neighbour_unresolved", "neighbour_unresolved", 1, "", "arping -c 3 -I eth0 10.57.0.9"},
    {"neighbour_wrong", "neighbour_wrong", 1, "client", "ip neigh del 10.57.0.1 dev eth0"},
    {"wrong_port_space", "wrong_port_space", 1, "", "--ps udp"},
    {"no_listener", "no_listener", 1, "", "start the server application on 10.57.0.1 port 7473"},
    {"no_listener-no_agent", "no_listener", 1, "", "a REJ came back"},
    {"rejected_by_application", "rejected_by_application", 1, "", "server busy: 16 connections at most"},
    {"peer_not_rdma", "peer_not_rdma", 1, "server", "rdma link add rxe_eth0 type rxe netdev eth0"},
    {"peer_port_down", "peer_port_down", 1, "server", "ip link set eth0 up"},
    {"firewall_roce", "firewall_roce", 1, "server", "nft delete rule inet filter input handle 4"},
    {"rp_filter", "rp_filter", 1, "server", "net.ipv4.conf.eth0.rp_filter=2"},
    {"roce_mode_mismatch", "roce_mode_mismatch", 1, "server",
     "echo \"RoCE v2\" > /sys/kernel/config/rdma_cm/rxe1/ports/1/default_roce_mode"},
    {"mtu_mismatch", "mtu_mismatch", 1, "server", "ip link set eth0 mtu 1500"},
    {"gid_link_local", "gid_link_local", 1, "both", "export NCCL_IB_GID_INDEX=1 UCX_IB_GID_INDEX=1"},
    {"gid_index_mismatch", "gid_index_mismatch", 1, "", "perftest -x 1 on the client, -x 3 on the server"},
    {"no_rdma_answer", "no_rdma_answer", 1, "", "no RDMA CM answer came back"},
    // InfiniBand (tests/fixtures/connect/make/infiniband.py): what only the subnet manager gives.
    {"ok-infiniband", "ok", 0, "", "IB, path MTU 4096"},
    {"no_subnet_manager", "no_subnet_manager", 1, "", "INIT with LID 0 and SM LID 0"},
    {"pkey_mismatch", "pkey_mismatch", 1, "", "'p1=0x8001, ipoib : 0xb8599f0300c54102=full ;'"},
    {"pkey_mismatch-limited", "pkey_mismatch", 1, "", "both ports are limited members of partition 0x0001"},
    {"no_path_record", "no_path_record", 1, "", "'sminfo'"},
    {"unknown", "unknown", 3, "", "RDMA_CM_EVENT_CONNECT_ERROR"},
    // firewall_roce's hosts with mlx5: the rule that dropped rxe's RoCE is no cause there.
    {"unknown-hardware_firewall", "unknown", 3, "", "switch ACLs, PFC and ECN settings"},
    // Hand-made on hardware no guest has: a RoCE LAG on a VLAN whose server drops by chain policy
    // (no cause: the NIC's RoCE never meets it), and iWARP (irdma), which has no path MTU.
    {"unknown-roce_bond_vlan_drop_policy", "unknown", 3, "", "switch ACLs, PFC and ECN settings"},
    {"ok-iwarp_irdma", "ok", 0, "", "6 transfers up to 64 KiB passed"},
    // tests/fixtures/connect/make/hardware.py: a T6 (iWARP, its second port down), whose
    // firewall never sees its TCP, and a dual-port ConnectX-5 whose second device serves.
    {"ok-iwarp_cxgb4", "ok", 0, "", "(cxgb4_0 port 1, iWARP)"},
    {"unknown-iwarp_cxgb4_drop_policy", "unknown", 3, "", "a hardware iWARP NIC runs its TCP on the card"},
    {"ok-dual_port", "ok", 0, "", "(mlx5_1 port 1, RoCE v2, path MTU 1024)"},
    {"peer_port_down-dual_port", "peer_port_down", 1, "", "the server's mlx5_1 port 1 (serving 10.72.0.11) is DOWN"},
    // A client whose only RDMA device rdma_cm cannot use (without diag-bind's verdict, which
    // names the NIC's PCI function): EFA is libfabric's, and soft-RoCE is offered only beside
    // it; a ConnectX with RoCE off is no device for eth0, and no route through eth0 helps.
    {"source_not_rdma-efa", "source_not_rdma", 1, "", "efa_0 is EFA, which rdma_cm does not drive"},
    {"source_not_rdma-roce_disabled", "source_not_rdma", 1, "", "'diag-bind 10.57.0.2' on the client"},
};

// Names the case in test listings, instead of gtest's dump of the struct's bytes.
void PrintTo(const ConnectExpectation& expectation, std::ostream* out) {
  *out << expectation.fixture;
}

class ConnectFixture : public testing::TestWithParam<ConnectExpectation> {};

TEST_P(ConnectFixture, NamesTheCause) {
  const auto& e = GetParam();
  const auto c = fixture(e.fixture);
  const auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), e.cause) << v.summary;
  EXPECT_EQ(static_cast<int>(v.exit_code), e.exit_code);
  EXPECT_EQ(v.fix_host, e.fix_host);
  EXPECT_TRUE(mentions(v, e.must_mention)) << to_json(v).dump(2);
  EXPECT_FALSE(v.summary.empty());
  EXPECT_EQ(v.summary.find('\n'), std::string::npos);
  const auto text = render_connect_text(c, v);
  EXPECT_NE(text.find("verdict: " + std::string(e.cause) + ": "), std::string::npos) << text;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ConnectFixture, testing::ValuesIn(connect_expectations),
                         [](const testing::TestParamInfo<ConnectExpectation>& param) {
                           // gtest names take letters, digits and '_' only: "no_listener-no_agent".
                           std::string name = param.param.fixture;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(ConnectFixtures, EveryFixtureHasAnExpectationAndSaysWhereItCameFrom) {
  std::set<std::string> expected;
  for (const auto& e : connect_expectations) expected.insert(e.fixture);
  std::size_t seen = 0;
  for (const auto& entry : fs::directory_iterator(connect_fixtures)) {
    if (entry.path().extension() != ".json") continue;
    ++seen;
    const auto name = entry.path().stem().string();
    EXPECT_TRUE(expected.contains(name)) << name << " has no expectation";
    EXPECT_TRUE(fixture_json(name).contains("origin")) << name;
  }
  EXPECT_EQ(seen, expected.size());
}

// Captured from the two-guest reproductions (tests/integration/connect_cases.sh, with
// RDMAKIT_CAPTURE_DIR): each cause broken for real, as the probe and the agent saw it. The
// verdict must stay what it was live: cause, exit code, the host the fix is for, and the fix.
struct Captured {
  const char* cause;
  int exit_code;
  const char* fix_host;
  const char* fix;
};

const Captured captured[] = {
    {"ok", 0, "", ""},
    {"firewall_roce", 1, "server", "nft delete rule inet rdmakit_dc input handle 2"},
    {"mtu_mismatch", 1, "server", "ip link set eth0 mtu 1500"},
    {"neighbour_unresolved", 1, "", ""},
    {"neighbour_wrong", 1, "client", "ip neigh del 10.57.0.1 dev eth0"},
    {"no_listener", 1, "", ""},
    {"no_route", 1, "client", "ip route add 10.59.0.1/32 dev eth0"},
    {"peer_not_rdma", 1, "server", "rdma link add rxe_eth0 type rxe netdev eth0"},
    {"peer_port_down", 1, "server", "ip link set eth0 up"},
    {"rp_filter", 1, "server", "sysctl -w net.ipv4.conf.all.rp_filter=2 net.ipv4.conf.eth0.rp_filter=2"},
    {"source_not_rdma", 1, "", ""},
    {"wrong_port_space", 1, "", ""},
};

void PrintTo(const Captured& capture, std::ostream* out) {
  *out << capture.cause;
}

class CapturedCase : public testing::TestWithParam<Captured> {};

TEST_P(CapturedCase, GivesTheVerdictItGaveLive) {
  const auto& e = GetParam();
  auto document = fixture_json(std::string("captured/") + e.cause);
  EXPECT_TRUE(document.contains("origin"));
  document.erase("origin");
  const auto c = connect_case_from_json(document);
  EXPECT_EQ(to_json(c), document);
  const auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), e.cause) << to_json(v).dump(2);
  EXPECT_EQ(static_cast<int>(v.exit_code), e.exit_code);
  EXPECT_EQ(v.fix_host, e.fix_host);
  EXPECT_EQ(v.fix, e.fix);
}

INSTANTIATE_TEST_SUITE_P(Captured, CapturedCase, testing::ValuesIn(captured),
                         [](const testing::TestParamInfo<Captured>& param) { return std::string(param.param.cause); });

TEST(ConnectFixtures, NoAgentVariantsListWhatTheyCannotTellApart) {
  const auto v = diagnose_connect(fixture("no_rdma_answer"));
  ASSERT_FALSE(v.candidates.empty());
  EXPECT_EQ(v.candidates.front(), "firewall_roce");
  EXPECT_NE(std::ranges::find(v.candidates, "peer_not_rdma"), v.candidates.end());
}

// ---- JSON ----

TEST(ConnectJson, EveryFixtureRoundTrips) {
  for (const auto& e : connect_expectations) {
    auto document = fixture_json(e.fixture);
    document.erase("origin");
    const auto c = connect_case_from_json(document);
    EXPECT_EQ(to_json(c), document) << e.fixture;
    EXPECT_EQ(to_json(connect_attempt_from_json(to_json(c.attempt))), to_json(c.attempt));
    EXPECT_EQ(to_json(host_view_from_json(to_json(c.local))), to_json(c.local));
    if (c.peer) {
      EXPECT_EQ(to_json(peer_answer_from_json(to_json(*c.peer))), to_json(*c.peer));
      EXPECT_EQ(to_json(parse_peer_answer(to_json(*c.peer).dump())), to_json(*c.peer));
    }
    const auto v = diagnose_connect(c);
    EXPECT_EQ(to_json(connect_verdict_from_json(to_json(v))), to_json(v)) << e.fixture;
  }
}

TEST(ConnectJson, KeysAreTheMemberNames) {
  const auto document = to_json(fixture("firewall_roce"));
  EXPECT_EQ(document.at("peer").at("view").at("firewall").at("rules").at(0).at("handle"), 4);
  EXPECT_TRUE(document.at("attempt").at("rejection").is_null());
  EXPECT_EQ(document.at("attempt").at("data").size(), 0U);
  EXPECT_EQ(document.at("local").at("devices").at(0).at("ports").at(0).at("gids").at(3).at("type"), "RoCE v2");
  const auto verdict = to_json(diagnose_connect(fixture("firewall_roce")));
  EXPECT_EQ(verdict.at("exit_code"), 1);
  EXPECT_EQ(verdict.at("fix_host"), "server");
}

TEST(ConnectJson, MissingMembersKeepTheirDefaults) {
  const auto c = connect_case_from_json(nlohmann::json::object());
  EXPECT_EQ(c.attempt.port_space, "tcp");
  EXPECT_EQ(c.agent.status, AgentStatus::not_tried);
  EXPECT_FALSE(c.peer.has_value());
  EXPECT_EQ(host_view_from_json({{"host_name", "h"}}).rp_filter_all, -1);
}

// The report's statuses are the C++ tables (connect_status.cpp), name for name and in order:
// every "status" enum of diag-connect's schema is one of them, and each is used.
void collect_status_enums(const nlohmann::json& node, std::set<std::vector<std::string>>& found) {
  if (node.is_object()) {
    if (const auto properties = node.find("properties"); properties != node.end() && properties->is_object()) {
      if (const auto status = properties->find("status"); status != properties->end() && status->contains("enum")) {
        found.insert(status->at("enum").get<std::vector<std::string>>());
      }
    }
    for (const auto& [key, value] : node.items()) collect_status_enums(value, found);
  } else if (node.is_array()) {
    for (const auto& value : node) collect_status_enums(value, found);
  }
}

std::vector<std::string> names_of(std::span<const std::string_view> names) {
  return {names.begin(), names.end()};
}

TEST(ConnectStatus, SchemaEnumsAreTheTables) {
  std::ifstream in(fs::path(RDMAKIT_SOURCE_DIR) / "doc/schema/diag-connect.schema.json");
  std::set<std::vector<std::string>> found;
  collect_status_enums(nlohmann::json::parse(in), found);
  EXPECT_EQ(found, (std::set{names_of(step_status_names()), names_of(agent_status_names())}));
  for (const auto name : step_status_names()) EXPECT_EQ(to_string(*step_status_named(name)), name);
  for (const auto name : agent_status_names()) EXPECT_EQ(to_string(*agent_status_named(name)), name);
  EXPECT_FALSE(step_status_named("not_tried").has_value());
  // A capture with a status outside the table is refused, naming where.
  auto document = fixture_json("ok");
  document["attempt"]["steps"][0]["status"] = "maybe";
  EXPECT_THROW((void)connect_case_from_json(document), ProtocolError);
  document = fixture_json("ok");
  document["agent"]["status"] = "skipped";
  EXPECT_THROW((void)connect_case_from_json(document), ProtocolError);
}

using test::refusal;

std::string rejection_of(const nlohmann::json& document) {
  return refusal([&document] { connect_case_from_json(document); });
}

TEST(ConnectJson, WrongTypesAreProtocolErrorsNamingTheMember) {
  auto document = fixture_json("ok");
  document["peer"]["view"]["netdevs"][1]["mtu"] = "1500";
  EXPECT_EQ(rejection_of(document), "peer.view.netdevs[1].mtu: expected an integer");

  document = fixture_json("ok");
  document["attempt"]["steps"][2]["ms"] = "fast";
  EXPECT_EQ(rejection_of(document), "attempt.steps[2].ms: expected a number");

  document = fixture_json("ok");
  document["local"]["devices"] = nlohmann::json::object();
  EXPECT_EQ(rejection_of(document), "local.devices: expected an array");

  document = fixture_json("ok");
  document["peer"]["serving"] = 1;
  EXPECT_EQ(rejection_of(document), "peer.serving: expected true or false");

  document = fixture_json("ok");
  document["agent"] = "ok";
  EXPECT_EQ(rejection_of(document), "agent: expected an object");

  EXPECT_EQ(rejection_of(nlohmann::json::array()), "the document: expected an object");

  document = fixture_json("ok");
  document["attempt"]["data"][0]["bytes"] = 1.5;
  EXPECT_EQ(rejection_of(document), "attempt.data[0].bytes: expected an integer");
}

TEST(ConnectJson, NumbersOutOfRangeAreRefused) {
  auto document = fixture_json("ok");
  document["attempt"]["port"] = 70000;
  EXPECT_EQ(rejection_of(document), "attempt.port: 70000 is out of range");
  document = fixture_json("ok");
  document["attempt"]["data"][0]["bytes"] = -1;
  EXPECT_EQ(rejection_of(document), "attempt.data[0].bytes: -1 is out of range");
  document = fixture_json("ok");
  document["local"]["netdevs"][0]["mtu"] = 1ULL << 40;
  EXPECT_NE(rejection_of(document).find("local.netdevs[0].mtu: "), std::string::npos);
  EXPECT_THROW(connect_verdict_from_json({{"exit_code", 2}}), ProtocolError);
}

TEST(ConnectJson, BoundsOnTextAndLists) {
  auto document = fixture_json("ok");
  document["peer"]["view"]["host_name"] = std::string(max_text_bytes + 1, 'x');
  EXPECT_EQ(rejection_of(document), "peer.view.host_name: 1025 bytes, more than the 1024 allowed");

  document = fixture_json("ok");
  auto& gids = document["peer"]["view"]["devices"][0]["ports"][0]["gids"];
  while (gids.size() <= max_list_entries) gids.push_back(gids[0]);
  EXPECT_EQ(rejection_of(document), "peer.view.devices[0].ports[0].gids: 513 entries, more than the 512 allowed");

  document = fixture_json("ok");
  document["attempt"]["rejection"] = {{"private_data", "\x1b[2Jgotcha"}};
  EXPECT_EQ(rejection_of(document), "attempt.rejection.private_data: holds a control character");
}

std::string answer_rejection(std::string_view bytes) {
  return refusal([bytes] { parse_peer_answer(bytes); });
}

TEST(ConnectJson, PeerAnswerIsNeverTrusted) {
  const auto answer = to_json(*fixture("ok").peer).dump();
  EXPECT_EQ(answer_rejection(answer), "accepted");
  EXPECT_NE(answer_rejection(answer.substr(0, answer.size() / 2)).find("the agent's answer is not JSON: "),
            std::string::npos);
  EXPECT_NE(answer_rejection("").find("not JSON"), std::string::npos);
  EXPECT_EQ(answer_rejection(std::string(max_answer_bytes + 1, ' ')),
            "the agent's answer is 262145 bytes, more than the 262144 allowed");
  EXPECT_EQ(answer_rejection(std::string(100, '[') + std::string(100, ']')),
            "the agent's answer nests deeper than 32 levels");
  EXPECT_EQ(answer_rejection(R"({"version": 0})"), "version: 0 is no agent protocol version");
  EXPECT_EQ(answer_rejection(R"({"view": {"listeners": [{"port": -5}]}})"),
            "view.listeners[0].port: -5 is out of range");
  EXPECT_EQ(answer_rejection("[1]"), "the document: expected an object");
  // Brackets inside strings do not count as nesting.
  EXPECT_EQ(answer_rejection(R"({"client_address": ")" + std::string(100, '[') + R"("})"), "accepted");
}

// ---- One fact at a time ----

ConnectCase timed_out(ConnectCase c) {
  for (auto& step : c.attempt.steps) {
    if (step.name == rdmakit::Step::connect) {
      step.status = StepStatus::timeout;
      step.errnum = 110;
      step.event = "RDMA_CM_EVENT_UNREACHABLE";
    }
  }
  c.attempt.data.clear();
  return c;
}

ViewNetdev second_netdev(const std::string& address) {
  return ViewNetdev{.name = "eth1",
                    .up = true,
                    .operstate = "up",
                    .mtu = 1500,
                    .mac = "52:54:00:56:00:01",
                    .addresses = {address},
                    .rp_filter = 0};
}

TEST(ConnectRules, StrictRpFilterWithAnAsymmetricRouteOnThePeer) {
  auto c = timed_out(fixture("ok"));
  EXPECT_EQ(diagnose_connect(c).cause.name(), "unknown");
  auto& view = c.peer->view;
  view.netdevs.push_back(second_netdev("10.56.0.1/24"));
  view.route->netdev = "eth1";
  EXPECT_EQ(diagnose_connect(c).cause.name(), "unknown") << "loose (2) on eth0 lets it through";
  view.netdevs[1].rp_filter = 1;
  const auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "rp_filter");
  EXPECT_EQ(v.fix, "sysctl -w net.ipv4.conf.all.rp_filter=2 net.ipv4.conf.eth0.rp_filter=2");
}

TEST(ConnectRules, StrictRpFilterOnTheClient) {
  auto c = timed_out(fixture("ok"));
  c.local.netdevs.push_back(second_netdev("10.56.0.2/24"));
  c.local.route->netdev = "eth1";
  c.local.devices.push_back(ViewDevice{.name = "rxe2", .netdev = "eth1", .ports = {}, .driver = "rdma_rxe"});
  c.local.rp_filter_all = 1;
  EXPECT_EQ(diagnose_connect(c).cause.name(), "unknown") << "the kernel takes max(all, eth0): 2 is loose";
  c.local.netdevs[1].rp_filter = 0;
  const auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "rp_filter");
  EXPECT_EQ(v.fix_host, "client");
}

// A rule on UDP 4791 as the probe reads it from nftables.
FirewallRule udp_4791(const std::string& chain, std::int64_t handle, const std::string& verdict) {
  return FirewallRule{.family = "inet",
                      .table = "filter",
                      .chain = chain,
                      .hook = chain,
                      .handle = handle,
                      .verdict = verdict,
                      .text = "udp dport 4791 " + verdict};
}

TEST(ConnectRules, DifferencesThatDidNotStopTheRunAreWarnings) {
  auto c = fixture("ok");
  c.peer->view.devices[0].ports[0].roce_mode = "IB/RoCE v1";
  c.peer->view.netdevs[1].mtu = 9000;
  c.peer->view.firewall.rules.push_back(udp_4791("input", 9, "drop"));
  const auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "ok");
  EXPECT_EQ(v.exit_code, ExitCode::ok);
  ASSERT_EQ(v.warnings.size(), 3U);
  EXPECT_NE(v.warnings[0].find("MTU differs"), std::string::npos);
  EXPECT_NE(v.warnings[1].find("IB/RoCE v1"), std::string::npos);
  EXPECT_NE(v.warnings[2].find("server: nftables inet filter input handle 9"), std::string::npos);
}

TEST(ConnectRules, DropPolicyWithoutAnAcceptIsAFirewallCause) {
  auto c = timed_out(fixture("ok"));
  c.peer->view.firewall.drop_policy_chains = {"inet filter input"};
  auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "firewall_roce");
  EXPECT_EQ(v.fix, "nft insert rule inet filter input udp dport 4791 accept");
  c.peer->view.firewall.rules.push_back(udp_4791("input", 3, "accept"));
  EXPECT_EQ(diagnose_connect(c).cause.name(), "unknown");
  c.peer->view.firewall.readable = false;
  c.peer->view.firewall.error = "no permission";
  v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "unknown");
  EXPECT_EQ(v.candidates, std::vector<std::string>{"firewall_roce"});
}

TEST(ConnectRules, TheClientsOwnFirewallToo) {
  auto c = timed_out(fixture("ok"));
  c.agent.status = AgentStatus::timeout;
  c.peer.reset();
  c.local.firewall.rules.push_back(udp_4791("output", 12, "reject"));
  const auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "firewall_roce");
  EXPECT_EQ(v.fix, "nft delete rule inet filter output handle 12");
  EXPECT_EQ(v.fix_host, "client");
}

// A hardware RoCE NIC's traffic never meets nftables or rp_filter: on mlx5 both hosts' rules
// are no cause, and the verdict points between the hosts instead.
TEST(ConnectRules, AHardwareNicsRoceNeverMeetsTheFirewallOrRpFilter) {
  auto c = timed_out(fixture("ok"));
  c.peer->view.firewall.drop_policy_chains = {"inet filter input"};
  c.local.firewall.rules.push_back(udp_4791("output", 12, "reject"));
  ASSERT_EQ(diagnose_connect(c).cause.name(), "firewall_roce");
  for (auto* view : {&c.local, &c.peer->view}) {
    for (auto& device : view->devices) device.driver = "mlx5_core";
  }
  auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "unknown");
  EXPECT_TRUE(v.warnings.empty());
  EXPECT_NE(v.next.find("switch ACLs, PFC and ECN settings"), std::string::npos) << v.next;
  // siw and rxe are software: their packets pass through the host's stack. But siw's are
  // TCP, which a rule on UDP 4791 never touches.
  c.peer->view.devices.front().driver = "siw";
  EXPECT_EQ(diagnose_connect(c).cause.name(), "unknown");
  c.peer->view.devices.front().driver = "rdma_rxe";
  EXPECT_EQ(diagnose_connect(c).cause.name(), "firewall_roce");
  EXPECT_EQ(diagnose_connect(c).fix_host, "server");
}

// The fixture as captured: no firewall in the verdict, not even as a warning or a candidate;
// the same hosts on soft-RoCE would be firewall_roce, the chain's policy the fix.
TEST(ConnectRules, ALagsRoceOnAVlanNeverMeetsADropPolicy) {
  auto c = fixture("unknown-roce_bond_vlan_drop_policy");
  auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "unknown");
  EXPECT_TRUE(v.warnings.empty()) << to_json(v).dump(2);
  EXPECT_TRUE(v.candidates.empty()) << to_json(v).dump(2);
  EXPECT_FALSE(mentions(v, "nftables")) << to_json(v).dump(2);
  for (auto* view : {&c.local, &c.peer->view}) view->devices.front().driver = "rdma_rxe";
  v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "firewall_roce");
  EXPECT_EQ(v.fix, "nft insert rule inet filter input udp dport 4791 accept");
  EXPECT_EQ(v.fix_host, "server");
}

// iWARP's connection setup is TCP handled by the RNIC (irdma, cxgb4): neither a UDP 4791 rule
// nor a drop policy is a cause there, and RoCE words do not belong in its verdicts.
TEST(ConnectRules, IwarpOnHardwareNeverMeetsTheFirewall) {
  auto c = timed_out(fixture("ok-iwarp_irdma"));
  c.peer->view.firewall.drop_policy_chains = {"inet filter input"};
  const auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "unknown");
  EXPECT_TRUE(v.warnings.empty()) << to_json(v).dump(2);
}

TEST(ConnectRules, AnIwarpConnectionIsNotWordedAsRoce) {
  const auto ok = diagnose_connect(fixture("ok-iwarp_irdma"));
  EXPECT_EQ(ok.summary.find("path MTU 0"), std::string::npos) << ok.summary;
  const auto failed = diagnose_connect(timed_out(fixture("ok-iwarp_irdma")));
  EXPECT_FALSE(mentions(failed, "RoCE")) << to_json(failed).dump(2);
}

TEST(ConnectRules, WrongNeighbourNeedsTheAgentsMacToDiffer) {
  auto c = timed_out(fixture("ok"));
  c.local.neighbour->state = "PERMANENT";
  EXPECT_NE(diagnose_connect(c).cause.name(), "neighbour_wrong") << "the entry holds the server's real MAC";
  c.local.neighbour->lladdr = "52:54:00:57:00:99";
  const auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "neighbour_wrong");
  EXPECT_TRUE(mentions(v, "server: eth0 owns 10.57.0.1 with MAC 52:54:00:57:00:01"));
}

TEST(ConnectRules, ListenersFromTheAgentWhenTheCmDumpIsUnreadable) {
  auto c = fixture("no_listener");
  c.peer->view.listeners_known = false;
  c.peer->view.listeners.clear();
  EXPECT_EQ(diagnose_connect(c).cause.name(), "no_listener");
  c.peer->serving_port = 7473;
  c.peer->serving_port_space = "ib";
  const auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "wrong_port_space");
  EXPECT_TRUE(v.fix.empty());
  EXPECT_NE(v.next.find("--ps ib"), std::string::npos) << v.next;
  c.peer->serving_port_space = "tcp";
  EXPECT_EQ(diagnose_connect(c).cause.name(), "unknown") << "a listener there contradicts the REJ";
}

// diag-bind's verdict on the host comes first where it is the host's alone, as diag-bind
// gives it; route-level causes only after.
TEST(ConnectRules, TheHostsOwnCauseIsTheVerdict) {
  auto c = fixture("source_not_rdma");
  c.host = Verdict{.cause = "no_rdma_device",
                   .exit_code = ExitCode::cause_found,
                   .summary = "the kernel has no RDMA device at all",
                   .fix = "modprobe -a ib_uverbs rdma_ucm rdma_rxe",
                   .next = "with an RDMA NIC, load its driver instead",
                   .details = {"no RDMA NIC driver is bound"},
                   .warnings = {}};
  auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "no_rdma_device");
  EXPECT_EQ(v.fix, c.host->fix);
  EXPECT_EQ(v.fix_host, "client");
  EXPECT_EQ(v.next, c.host->next);
  EXPECT_TRUE(mentions(v, "client: no RDMA NIC driver is bound"));
  // A netdev without RDMA on the way to a remote target is the route's: source_not_rdma.
  c.host->cause = "netdev_without_rdma";
  EXPECT_EQ(diagnose_connect(c).cause.name(), "source_not_rdma");
  // On the host's own address, it is the host's.
  c.attempt.target = "10.57.0.2";
  EXPECT_EQ(diagnose_connect(c).cause.name(), "netdev_without_rdma");
  // A port with no GID the path can use refuses the resolve on this host: diag-bind's verdict
  // (before this, a route out of a netdev with only link-local GIDs read as source_not_rdma).
  c.attempt.target = "10.70.0.9";
  for (const char* cause : {"gid_link_local", "gid_missing"}) {
    c.host->cause = *BindCause::named(cause);
    EXPECT_EQ(diagnose_connect(c).cause.name(), cause);
  }
  // What only the route or the server explains stays theirs.
  c.host->cause = "no_route";
  EXPECT_NE(diagnose_connect(c).cause.name(), "no_route");
}

// A client whose NIC has RoCE switched off: diag-bind's verdict on the host knows it (the NIC's
// PCI function), and its remedy, not a soft-RoCE device, is the fix.
TEST(ConnectRules, AClientNicWithRoceOffTakesDiagBindsRemedy) {
  auto c = fixture("source_not_rdma");
  c.local.devices.clear();
  const auto soft = diagnose_connect(c);
  ASSERT_EQ(soft.cause.name(), "source_not_rdma");
  EXPECT_NE(soft.fix.find("type rxe"), std::string::npos) << soft.fix;
  c.host = Verdict{.cause = "netdev_without_rdma",
                   .exit_code = ExitCode::cause_found,
                   .summary = "eth0's NIC (mlx5_0, 0000:3b:00.0) has RoCE switched off",
                   .fix = "devlink dev param set pci/0000:3b:00.0 name enable_roce value true cmode driverinit",
                   .next = "then 'devlink dev reload pci/0000:3b:00.0'",
                   .details = {"mlx5_0 shares eth0's PCI function 0000:3b:00.0 and has no RoCE GID"},
                   .warnings = {}};
  const auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "source_not_rdma");
  EXPECT_EQ(v.fix, c.host->fix);
  EXPECT_EQ(v.next, c.host->next);
  EXPECT_TRUE(mentions(v, "RoCE switched off"));
  EXPECT_TRUE(mentions(v, "client: mlx5_0 shares eth0's PCI function"));
}

TEST(ConnectRules, ResolveAddrEnodevAloneIsSourceNotRdma) {
  auto c = fixture("source_not_rdma");
  c.local.route.reset();
  const auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "source_not_rdma");
  EXPECT_TRUE(mentions(v, "ENODEV"));
}

TEST(ConnectRules, RoceV1OnTheClientIsFixedThere) {
  auto c = timed_out(fixture("ok"));
  c.local.devices[0].ports[0].roce_mode = "IB/RoCE v1";
  const auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "roce_mode_mismatch");
  EXPECT_EQ(v.fix_host, "client");
  EXPECT_EQ(v.fix,
            "mkdir -p /sys/kernel/config/rdma_cm/rxe1 && echo \"RoCE v2\" > "
            "/sys/kernel/config/rdma_cm/rxe1/ports/1/default_roce_mode");
}

TEST(ConnectRules, LargeTransfersDyingWithoutAnAgentStillPointAtTheMtu) {
  auto c = fixture("mtu_mismatch");
  c.agent.status = AgentStatus::timeout;
  c.peer.reset();
  const auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "mtu_mismatch");
  EXPECT_TRUE(v.fix.empty());
  c.attempt.data[0].status = StepStatus::failed;  // 64 B died too: not an MTU
  EXPECT_EQ(diagnose_connect(c).cause.name(), "unknown");
}

TEST(ConnectRules, APortNotActiveBehindAnUpNetdev) {
  auto c = timed_out(fixture("ok"));
  c.peer->view.devices[0].ports[0].state = "DOWN";
  const auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "peer_port_down");
  EXPECT_TRUE(mentions(v, "rxe0 port 1: DOWN"));
}

TEST(ConnectRules, AStaticNeighbourFirstAmongTheCandidates) {
  auto c = fixture("no_rdma_answer");
  c.local.neighbour->state = "PERMANENT";
  c.local.neighbour->lladdr = "52:54:00:57:00:01";
  c.agent.status = AgentStatus::refused;
  // A static entry that the agent cannot confirm or deny: neighbour_wrong names it.
  EXPECT_EQ(diagnose_connect(c).cause.name(), "neighbour_wrong");
}

// ---- --gid-index: the index another stack is given, on both hosts ----

TEST(ConnectGid, ALinkLocalIndexAcrossARouter) {
  auto c = fixture("gid_link_local");
  auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "gid_link_local");
  EXPECT_EQ(v.exit_code, ExitCode::cause_found);
  EXPECT_EQ(v.summary,
            "GID index 0 is link-local on the client and the server and the path to 10.61.0.1 is routed: a stack "
            "given index 0 cannot reach the server, though rdma_cm connected");
  ASSERT_GE(v.evidence.size(), 5U);
  EXPECT_EQ(v.evidence[0], "client: ip route get 10.61.0.1: via 10.57.0.254 dev eth0");
  EXPECT_EQ(v.evidence[1],
            "client: rxe1 port 1 index 0: 0 fe80::5054:ff:fe57:2 RoCE v2 eth0 (index 0 is link-local "
            "fe80::5054:ff:fe57:2 (RoCE v2), which no router forwards)");
  EXPECT_EQ(v.evidence[3], "client: the entry for 10.57.0.2: 1 ::ffff:10.57.0.2 RoCE v2 eth0 on rxe1 port 1");
  EXPECT_EQ(v.evidence[4], "server: the entry for 10.61.0.1: 1 ::ffff:10.61.0.1 RoCE v2 eth0 on rxe1 port 1");
  // Both hosts hold their path address at index 1: one setting, on both, is the fix.
  EXPECT_EQ(v.fix, "export NCCL_IB_GID_INDEX=1 UCX_IB_GID_INDEX=1");
  EXPECT_EQ(v.fix_host, "both");
  EXPECT_EQ(v.next,
            "perftest -x 1 and Open MPI --mca btl_openib_gid_index 1 on both hosts; to check: diag-connect 10.61.0.1 "
            "--gid-index 1");
  EXPECT_NE(render_connect_text(c, v).find("  fix (on both hosts): export NCCL_IB_GID_INDEX=1"), std::string::npos);

  // The advised index passes.
  c.attempt.gid_index = 1;
  EXPECT_EQ(diagnose_connect(c).cause.name(), "ok");

  // Where the hosts hold their addresses at different indexes, no one setting fixes it.
  c = fixture("gid_link_local");
  auto& gids = c.peer->view.devices[1].ports[0].gids;
  ASSERT_EQ(gids[1].gid, "::ffff:10.61.0.1");
  gids[1].gid = "::ffff:10.61.0.9";
  gids.push_back(GidEntry{.index = 3, .gid = "::ffff:10.61.0.1", .type = "RoCE v2", .netdev = "eth0"});
  v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "gid_link_local");
  EXPECT_TRUE(v.fix.empty());
  EXPECT_EQ(v.fix_host, "");
  EXPECT_NE(v.next.find("perftest -x 1 on the client, -x 3 on the server"), std::string::npos) << v.next;
  EXPECT_NE(v.next.find("server: perftest -d rxe1 -i 1 -x 3, NCCL NCCL_IB_HCA=rxe1:1 NCCL_IB_GID_INDEX=3"),
            std::string::npos)
      << v.next;
}

TEST(ConnectGid, WithoutTheAgentTheServersIndexIsUnknown) {
  auto c = fixture("gid_link_local");
  c.agent.status = AgentStatus::timeout;
  c.peer.reset();
  auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "gid_link_local");
  EXPECT_TRUE(mentions(v, "server: index 0: unknown, the agent at 10.58.0.1:7472 answered timeout"));
  EXPECT_TRUE(v.fix.empty());
  EXPECT_NE(v.next.find("run diag-connect --serve on the server"), std::string::npos) << v.next;

  c = fixture("gid_index_mismatch");
  c.agent.status = AgentStatus::refused;
  c.peer.reset();
  v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "ok") << "the client's index 1 is its own address; the server's is unknown";
  ASSERT_EQ(v.warnings.size(), 1U);
  EXPECT_NE(v.warnings[0].find("checked on the client only"), std::string::npos) << v.warnings[0];
  c.attempt.gid_index = 2;  // fd57::2 for an IPv4 path
  v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "gid_index_mismatch");
  EXPECT_NE(v.next.find("diag-connect --serve"), std::string::npos) << v.next;
}

TEST(ConnectGid, AnIndexThatHoldsAnotherAddressOnTheServer) {
  auto c = fixture("gid_index_mismatch");
  auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "gid_index_mismatch");
  EXPECT_EQ(v.summary,
            "GID index 1 does not fit both hosts: on the server, index 1 holds ::ffff:10.57.9.9, not 10.57.0.1, and "
            "10.57.9.9 is in no subnet of the client; a stack given index 1 on both fails, though rdma_cm connected");
  ASSERT_GE(v.evidence.size(), 4U);
  // Both entries side by side, then what each host should be given.
  EXPECT_EQ(v.evidence[0], "client: rxe1 port 1 index 1: 1 ::ffff:10.57.0.2 RoCE v2 eth0");
  EXPECT_EQ(v.evidence[1],
            "server: rxe1 port 1 index 1: 1 ::ffff:10.57.9.9 RoCE v2 eth0 (index 1 holds ::ffff:10.57.9.9, not "
            "10.57.0.1, and 10.57.9.9 is in no subnet of the client)");
  EXPECT_EQ(v.evidence[3], "server: the entry for 10.57.0.1: 3 ::ffff:10.57.0.1 RoCE v2 eth0 on rxe1 port 1");
  EXPECT_TRUE(v.fix.empty());
  EXPECT_EQ(v.fix_host, "");
  EXPECT_EQ(v.next,
            "one index for both hosts cannot be right: give each its own (perftest -x 1 on the client, -x 3 on the "
            "server); client: perftest -d rxe1 -i 1 -x 1, NCCL NCCL_IB_HCA=rxe1:1 NCCL_IB_GID_INDEX=1, UCX "
            "UCX_NET_DEVICES=rxe1:1 UCX_IB_GID_INDEX=1; server: perftest -d rxe1 -i 1 -x 3, NCCL "
            "NCCL_IB_HCA=rxe1:1 NCCL_IB_GID_INDEX=3, UCX UCX_NET_DEVICES=rxe1:1 UCX_IB_GID_INDEX=3");

  // Another address the client reaches on its link is as good as the path's own.
  c.local.netdevs[0].addresses.emplace_back("10.57.9.2/24");
  EXPECT_EQ(diagnose_connect(c).cause.name(), "ok");
}

TEST(ConnectGid, AnIndexOfAnotherTypeOrFamily) {
  auto c = fixture("gid_index_mismatch");
  c.attempt.gid_index = 2;  // fd57::2 and fd57::1: IPv6 entries for an IPv4 path, on both hosts
  auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "gid_index_mismatch");
  EXPECT_TRUE(mentions(v, "on the client, index 2 is RoCE v2 fd57::2, an IPv6 address where 10.57.0.2 is IPv4"));
  c = fixture("ok");  // RoCE v1 and v2 entries, the same on both hosts
  c.attempt.gid_index = 3;
  EXPECT_EQ(diagnose_connect(c).cause.name(), "ok");
  c.attempt.gid_index = 2;
  v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "gid_index_mismatch");
  EXPECT_TRUE(mentions(v, "index 2 is RoCE v1 ::ffff:10.57.0.2, not RoCE v2"));
  EXPECT_EQ(v.fix, "export NCCL_IB_GID_INDEX=3 UCX_IB_GID_INDEX=3");
  EXPECT_EQ(v.fix_host, "both");
  // On one link, both link-local entries of one type reach each other: index 1 (RoCE v2) works.
  c.attempt.gid_index = 1;
  EXPECT_EQ(diagnose_connect(c).cause.name(), "ok");
  c.attempt.gid_index = 9;
  EXPECT_TRUE(mentions(diagnose_connect(c), "index 9 of rxe1 port 1 is empty"));
}

TEST(ConnectGid, WithoutAnIndexTheDefaultsAreWarnings) {
  auto c = fixture("gid_link_local");
  c.attempt.gid_index.reset();
  auto v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "ok");
  ASSERT_EQ(v.warnings.size(), 1U);
  EXPECT_EQ(v.warnings[0],
            "the path is routed and GID index 0 is link-local (client: ip route get 10.61.0.1: via 10.57.0.254 dev "
            "eth0): stacks left at index 0 fail across the router");
  c = fixture("gid_index_mismatch");
  c.attempt.gid_index.reset();
  v = diagnose_connect(c);
  EXPECT_EQ(v.cause.name(), "ok");
  ASSERT_EQ(v.warnings.size(), 1U);
  EXPECT_EQ(v.warnings[0],
            "one NCCL_IB_GID_INDEX for both hosts cannot be right: client 1, server 3 (perftest -x, "
            "UCX_IB_GID_INDEX likewise)");
  EXPECT_TRUE(diagnose_connect(fixture("ok")).warnings.empty());
}

TEST(ConnectGid, OnlyWhereTheConnectionWorked) {
  auto c = timed_out(fixture("gid_link_local"));
  EXPECT_NE(diagnose_connect(c).cause.name(), "gid_link_local") << "a failed connect has its own cause";
}

// ---- Text ----

TEST(ConnectText, StepsSourceDataVerdictFixAndCandidates) {
  auto c = fixture("mtu_mismatch");
  auto text = render_connect_text(c, diagnose_connect(c));
  for (const char* part :
       {"connect to 10.57.0.1:7471 (tcp)", "resolve_addr", "source\n", "GID ::ffff:10.57.0.2 (RoCE v2)",
        "path MTU 1024", "data check\n", "64 KiB", "transport retry counter exceeded",
        "verdict: mtu_mismatch: ", "  fix (on the server): ip link set eth0 mtu 1500\n"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << "\n" << text;
  }
  c = fixture("no_rdma_answer");
  text = render_connect_text(c, diagnose_connect(c));
  EXPECT_NE(text.find("  candidates: firewall_roce, peer_not_rdma"), std::string::npos) << text;
  EXPECT_NE(text.find("agent 10.57.0.1:7472: refused"), std::string::npos) << text;
  c = fixture("rejected_by_application");
  text = render_connect_text(c, diagnose_connect(c));
  EXPECT_NE(text.find("rejected: reason 28 (consumer defined), by the application"), std::string::npos) << text;
}

}  // namespace
}  // namespace rdmakit::diag
