// rdma_pingmesh's node (lib/pingmesh/pingmesh_node.hpp) over a fake datagram port: its
// schedule, its responder and its windows, two nodes on a wire of function calls; and what
// it publishes (lib/pingmesh/pingmesh_publisher.hpp). The session's loop over the real port
// runs in the guest (tests/integration/pingmesh_cases.sh).

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "lib/base/error.hpp"
#include "lib/pingmesh/pingmesh_node.hpp"
#include "lib/pingmesh/pingmesh_probe.hpp"
#include "lib/pingmesh/pingmesh_publisher.hpp"

namespace rdmakit::pingmesh {
namespace {

constexpr std::uint64_t node_test_ms = 1'000'000;

// A datagram port that records what the node asks of it; the test delivers the datagrams.
class FakeProbePort {
 public:
  struct Address {
    std::string peer;
  };
  struct Route {
    std::string source;
  };
  struct Arrival {
    std::span<const std::uint8_t> bytes;
    std::string source;
    std::uint32_t source_qp = 0;
    std::uint64_t received_ns = 0;
    std::optional<std::uint64_t> completion_stamp;
    Route route() const { return {.source = source}; }
  };
  struct Resolution {
    std::string key;
    std::optional<Address> address;
    std::string error;
  };
  struct Sent {
    std::vector<std::uint8_t> bytes;
    std::string to;
    std::uint64_t tag = 0;
  };

  std::optional<CompletionClock> completion_clock() const { return clock; }
  void resolve(const std::string& key, const std::string& address) {
    if (refuse_lookups) throw RdmaError("rdma_resolve_addr", address, ENETUNREACH, address);
    resolves.push_back(address);
    pending.insert(key);
  }
  bool resolving(const std::string& key) const { return pending.contains(key); }
  bool send(std::span<const std::uint8_t> bytes, const Address& to, std::uint64_t tag) {
    if (queue_full) return false;
    sent.push_back({.bytes = {bytes.begin(), bytes.end()}, .to = to.peer, .tag = tag});
    return true;
  }
  Address reply_to(const Route& route) {
    if (no_way_back.contains(route.source)) throw RdmaError("ibv_create_ah", route.source, EHOSTUNREACH);
    return {.peer = route.source};
  }
  std::uint64_t failed() const { return 0; }

  // The lookups under way end: each resolved, or failed with `error`.
  std::vector<Resolution> finish_lookups(const std::set<std::string>& failing = {}) {
    std::vector<Resolution> ends;
    for (const auto& key : pending) {
      if (failing.contains(key)) {
        ends.push_back({.key = key, .address = std::nullopt, .error = "no answer to the SIDR request"});
      } else {
        ends.push_back({.key = key, .address = Address{.peer = key}, .error = {}});
      }
    }
    pending.clear();
    return ends;
  }
  // What was sent, taken.
  std::vector<Sent> take_sent() { return std::exchange(sent, {}); }

  std::optional<CompletionClock> clock;
  std::vector<std::string> resolves;
  std::set<std::string> pending;
  std::vector<Sent> sent;
  std::set<std::string> no_way_back;
  bool queue_full = false;
  bool refuse_lookups = false;
};

using FakeNode = Node<FakeProbePort>;

// What a node's windows told: state changes, window lines, diagnoses asked for.
struct Told {
  std::vector<std::string> changes;  // "name: from -> to"
  std::size_t windows = 0;
  std::vector<std::string> bad;  // peers' names

  NodeEvents events() {
    return {.state_changed =
                [this](const PathSnapshot* path, PathState from, PathState to, const std::string&, double) {
                  changes.push_back(fmt::format("{}: {} -> {}", path != nullptr ? path->peer.name : "node",
                                                to_string(from), to_string(to)));
                },
            .window_closed = [this](const PathSnapshot&, double) { ++windows; },
            .went_bad = [this](const Peer& peer) { bad.push_back(peer.name); }};
  }
};

const std::vector<Peer> node_test_peers{
    {.address = "10.0.0.1", .name = "a"}, {.address = "10.0.0.2", .name = "b"}, {.address = "10.0.0.3", .name = "c"}};

NodeSettings settings_of(const std::string& name, const std::string& address) {
  return {.node = name,
          .address = address,
          .clock = "software",
          .window_s = 1,
          .answer_timeout_s = 0.2,
          .answer_any = false,
          .rates = {.in_leaf_per_s = 10, .across_per_s = 1, .sample_per_leaf = 2, .cap_per_s = 1000},
          .thresholds = {},
          .session = 0x5eed,
          .seed = 42};
}

// One node on a fake port, on a clock the test moves.
struct NodeUnderTest {
  NodeUnderTest(const std::string& name, const std::string& address)
      : node(
            settings_of(name, address), port, [this] { return now_ns; }, told.events()) {
    node.take_peers(node_test_peers);
    node.plan(mesh::Topology{});
  }
  // Its paths resolved (but those in `failing`).
  void resolve_all(const std::set<std::string>& failing = {}) {
    node.resolve_due(now_ns);
    node.take_resolutions(port.finish_lookups(failing), 0, now_ns);
  }
  // A datagram from `source` arrives now.
  void arrive(std::span<const std::uint8_t> bytes, const std::string& source) {
    node.on_arrival({.bytes = bytes, .source = source, .source_qp = 7, .received_ns = now_ns, .completion_stamp = {}});
  }

  std::uint64_t now_ns = 1000 * node_test_ms;
  FakeProbePort port;
  Told told;
  FakeNode node;
};

std::vector<std::string> destinations(const std::vector<FakeProbePort::Sent>& sent) {
  std::vector<std::string> to;
  for (const auto& datagram : sent) to.push_back(datagram.to);
  return to;
}

ProbeMessage decoded(const FakeProbePort::Sent& datagram) {
  const auto result = decode_probe(datagram.bytes);
  EXPECT_EQ(result.outcome, ProbeDecode::ok);
  return result.message;
}

TEST(PingmeshNode, ProbesOnlyResolvedPathsAtTheirRate) {
  NodeUnderTest a("a", "10.0.0.1");
  EXPECT_EQ(a.node.path_count(), 2U);  // b and c: never itself
  a.node.resolve_due(a.now_ns);
  EXPECT_EQ(a.port.resolves, (std::vector<std::string>{"10.0.0.2", "10.0.0.3"}));
  a.node.send_due(a.now_ns + 1000 * node_test_ms);
  EXPECT_TRUE(a.port.sent.empty()) << "nothing is sent before a path is resolved";
  a.node.take_resolutions(a.port.finish_lookups({"10.0.0.3"}), 0, a.now_ns);
  // 10 a second, jittered by up to 10%: over 2 s of 1 ms steps, 18 to 22 probes to b.
  for (int step = 0; step < 2000; ++step) {
    a.now_ns += node_test_ms;
    a.node.send_due(a.now_ns);
  }
  const auto sent = a.port.take_sent();
  EXPECT_GE(sent.size(), 18U);
  EXPECT_LE(sent.size(), 22U);
  for (const auto& datagram : sent) {
    EXPECT_EQ(datagram.to, "10.0.0.2");
    EXPECT_EQ(decoded(datagram).kind, ProbeKind::probe);
    EXPECT_EQ(datagram.tag, 0U) << "no completion is tracked where nobody stamps";
  }
  EXPECT_GT(a.node.next_due_ns(), a.now_ns);
  EXPECT_LE(a.node.next_due_ns(), a.now_ns + 110 * node_test_ms);
}

TEST(PingmeshNode, AFailedLookupIsTriedAgainAWindowLater) {
  NodeUnderTest a("a", "10.0.0.1");
  a.resolve_all({"10.0.0.3"});
  a.port.resolves.clear();
  a.node.resolve_due(a.now_ns + 500 * node_test_ms);
  EXPECT_TRUE(a.port.resolves.empty()) << "within the window";
  a.node.resolve_due(a.now_ns + 1000 * node_test_ms);
  EXPECT_EQ(a.port.resolves, std::vector<std::string>{"10.0.0.3"});
  // One that cannot start says why in the path's verdict once windows pass unsent.
  NodeUnderTest lonely("a", "10.0.0.1");
  lonely.port.refuse_lookups = true;
  lonely.node.resolve_due(lonely.now_ns);
  for (int window = 0; window < 2; ++window) {
    lonely.now_ns += 1000 * node_test_ms;
    lonely.node.close_window(lonely.now_ns, 0);
  }
  for (const auto& path : lonely.node.snapshot().paths) {
    EXPECT_EQ(path.verdict.state, PathState::down);
    EXPECT_NE(path.verdict.why.find("rdma_resolve_addr"), std::string::npos) << path.verdict.why;
  }
}

TEST(PingmeshNode, AnswersThePinglistsPeersOnly) {
  NodeUnderTest b("b", "10.0.0.2");
  const auto probe = encode(ProbeMessage{.kind = ProbeKind::probe, .session = 9, .sequence = 4, .prober_sent_ns = 77});
  b.arrive(probe, "10.0.0.1");
  auto sent = b.port.take_sent();
  ASSERT_EQ(destinations(sent), std::vector<std::string>{"10.0.0.1"});
  const auto answer = decoded(sent[0]);
  EXPECT_EQ(answer.kind, ProbeKind::answer);
  EXPECT_EQ(answer.session, 9U);
  EXPECT_EQ(answer.sequence, 4U);
  EXPECT_EQ(answer.prober_sent_ns, 77U);

  b.arrive(probe, "10.9.9.9");  // not in the pinglist
  b.port.no_way_back.insert("10.0.0.3");
  b.arrive(probe, "10.0.0.3");  // no address handle back to it
  b.arrive(std::span(probe).first(10), "10.0.0.1");
  std::array<std::uint8_t, probe_size> foreign{};
  b.arrive(foreign, "10.0.0.1");
  b.arrive(probe, "");  // no GRH, nobody it resolved
  b.port.queue_full = true;
  b.arrive(probe, "10.0.0.1");
  EXPECT_TRUE(b.port.take_sent().empty());
  EXPECT_EQ(b.node.snapshot().ignored,
            (std::map<std::string, std::uint64_t>{
                {"foreign", 1}, {"no_way_back", 1}, {"send_queue_full", 1}, {"short", 1}, {"unknown_peer", 2}}));
  EXPECT_EQ(b.node.admission("10.9.9.9"), "10.9.9.9 is not in b's pinglist");
  EXPECT_EQ(b.node.admission("10.0.0.1"), std::nullopt);
}

TEST(PingmeshNode, AnswersAnyoneWhenToldTo) {
  FakeProbePort port;
  auto settings = settings_of("b", "10.0.0.2");
  settings.answer_any = true;
  Told told;
  FakeNode b(
      settings, port, [] { return std::uint64_t{5}; }, told.events());
  b.take_peers(node_test_peers);
  const auto probe = encode(ProbeMessage{.kind = ProbeKind::probe, .session = 9, .sequence = 1, .prober_sent_ns = 1});
  b.on_arrival({.bytes = probe, .source = "10.9.9.9", .source_qp = 7, .received_ns = 1, .completion_stamp = {}});
  EXPECT_EQ(destinations(port.take_sent()), std::vector<std::string>{"10.9.9.9"});
}

// Two nodes on a wire, a millisecond a step: a's probes go to b, b's answers back (or are lost).
void run_wire(NodeUnderTest& a, NodeUnderTest& b, std::uint64_t duration_ns, bool answers_lost) {
  for (std::uint64_t spent = 0; spent < duration_ns; spent += node_test_ms) {
    a.now_ns += node_test_ms;
    b.now_ns = a.now_ns;
    a.node.send_due(a.now_ns);
    for (const auto& probe : a.port.take_sent()) {
      if (probe.to == "10.0.0.2") b.arrive(probe.bytes, "10.0.0.1");
    }
    for (const auto& answer : b.port.take_sent()) {
      if (!answers_lost) a.arrive(answer.bytes, "10.0.0.2");
    }
  }
}

TEST(PingmeshNode, ProbesAnsweredAcrossTheWireAndAPathThatGoesDown) {
  NodeUnderTest a("a", "10.0.0.1");
  NodeUnderTest b("b", "10.0.0.2");
  a.resolve_all({"10.0.0.3"});
  run_wire(a, b, 1000 * node_test_ms, false);
  a.node.close_window(a.now_ns, 0);
  auto to_b = a.node.snapshot().paths.at(0);
  EXPECT_EQ(to_b.peer.name, "b");
  EXPECT_GE(to_b.sent_total, 9U);
  EXPECT_EQ(to_b.answered_total, to_b.sent_total);
  EXPECT_EQ(to_b.lost_total, 0U);
  EXPECT_EQ(to_b.verdict.state, PathState::ok);
  EXPECT_EQ(a.told.windows, 2U);  // a window line for each path
  EXPECT_EQ(a.told.changes, std::vector<std::string>{"b: unknown -> ok"});

  // b's answers stop: a window later the path is down, and diag-connect is asked to look.
  run_wire(a, b, 1000 * node_test_ms, true);
  a.node.close_window(a.now_ns, 0);
  to_b = a.node.snapshot().paths.at(0);
  EXPECT_EQ(to_b.verdict.state, PathState::down) << to_b.verdict.why;
  EXPECT_GT(to_b.lost_total, 0U);
  EXPECT_EQ(a.told.bad, (std::vector<std::string>{"b", "c"}));  // c: never resolved
  EXPECT_EQ(a.told.changes, (std::vector<std::string>{"b: unknown -> ok", "b: ok -> down", "c: unknown -> down"}));
}

TEST(PingmeshNode, AnswersToNoProbeOfOursAreCounted) {
  NodeUnderTest a("a", "10.0.0.1");
  a.resolve_all();
  const auto stray = encode(
      answer_to(ProbeMessage{.kind = ProbeKind::probe, .session = 0x5eed, .sequence = 99, .prober_sent_ns = 1}, 2, 3));
  a.arrive(stray, "10.0.0.2");
  a.arrive(stray, "10.0.0.9");  // no path of a's
  const auto stamps = encode(
      stamps_for(ProbeMessage{.kind = ProbeKind::probe, .session = 0x5eed, .sequence = 1, .prober_sent_ns = 1}, 10));
  a.arrive(stamps, "10.0.0.2");  // a asked for none: nobody stamps here
  a.node.close_window(a.now_ns + 1000 * node_test_ms, 0);
  const auto node = a.node.snapshot();
  EXPECT_EQ(node.paths.at(0).unexpected_total, 1U);
  EXPECT_EQ(node.ignored, (std::map<std::string, std::uint64_t>{{"stamps_unmatched", 1}, {"unknown_peer", 1}}));
}

std::string node_test_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(PingmeshPublisher, TheTextfileWrittenWholeAndKeptWhenItCannotBe) {
  const auto folder = std::filesystem::temp_directory_path() / ("pingmesh_publisher_" + std::to_string(getpid()));
  std::filesystem::create_directories(folder);
  const auto prom = folder / "pingmesh.prom";
  NodeUnderTest a("a", "10.0.0.1");
  Publisher publisher(prom.string(), nullptr);
  publisher.publish(a.node.snapshot());
  EXPECT_EQ(publisher.prom_file_failure(), std::nullopt);
  const auto written = node_test_file(prom);
  EXPECT_NE(written.find("rdmakit_pingmesh_"), std::string::npos);
  EXPECT_EQ(written.find("# EOF"), std::string::npos) << "the Prometheus text format, not OpenMetrics";

  // Its folder gone: the failure kept for the report, then written again once it is back.
  std::filesystem::remove_all(folder);
  publisher.publish(a.node.snapshot());
  ASSERT_TRUE(publisher.prom_file_failure().has_value());
  EXPECT_NE(publisher.prom_file_failure()->find(prom.string()), std::string::npos) << *publisher.prom_file_failure();
  std::filesystem::create_directories(folder);
  publisher.publish(a.node.snapshot());
  EXPECT_EQ(publisher.prom_file_failure(), std::nullopt);
  EXPECT_EQ(node_test_file(prom), written);
  std::filesystem::remove_all(folder);
}

}  // namespace
}  // namespace rdmakit::pingmesh
