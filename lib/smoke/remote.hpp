#pragma once
// rdma_smoke across two hosts: `--serve` runs each case's servers on its host when the peer
// asks, `--peer` runs the clients against it. They talk over one TCP connection in JSON
// objects, one a frame (lib/net/sealed_frames.hpp); the serving side runs only the cases
// of its own plan, never a command it is sent.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/described_json.hpp"
#include "lib/net/peer_gate.hpp"
#include "lib/net/sealed_frames.hpp"
#include "lib/net/shared_key.hpp"
#include "lib/smoke/run.hpp"

namespace rdmakit::smoke {

inline constexpr std::uint16_t default_control_port = 7473;
// A control message larger than this is refused: the largest is the servers' runs of one
// case, their reports and the ends of their stderr.
inline constexpr std::size_t max_control_bytes = 8 << 20;
// And nested no deeper than this (lib/base/untrusted_json): a message of runs, each with a
// tool's report, is 3 levels and the report; the deepest report is 11.
inline constexpr std::size_t max_control_depth = 32;
// How long each side gives the other for the key handshake (lib/net/key_handshake) once
// connected: three messages of at most 72 bytes.
inline constexpr std::chrono::seconds handshake_timeout{10};
// The handshakes the serving side makes at once while it waits for its peer, and from one
// address: a silent connection holds one of them for handshake_timeout, not the port.
inline constexpr std::size_t handshake_seats = 16;
inline constexpr std::size_t handshake_seats_per_peer = 4;
inline constexpr int handshake_backlog = 64;

// One TCP connection carrying JSON objects, one a frame (lib/net/sealed_frames.hpp: tagged
// with the key handshake's message keys when it was keyed); every read has a deadline.
class ControlChannel {
 public:
  // Connects to host:port (numeric) by the deadline and makes the key handshake with `key`
  // (nullptr: none); throws std::runtime_error saying why not, handshake::AuthenticationError
  // when the serving side refused this side or could not prove it holds the key.
  // `source`: the address to connect from ("" : the route's), which the serving side takes
  // as this side's and runs its clients toward.
  static ControlChannel connect_to(const std::string& host, std::uint16_t port, Clock::time_point deadline, int stop_fd,
                                   const SharedKey* key = nullptr, const std::string& source = "");
  // Listens on bind:port ("" for every address) and takes the first connection that passes
  // the key handshake with `key` (nullptr: none) within handshake_timeout, the handshakes
  // made side by side (handshake_seats); a peer refused by it is told why, said through
  // `refused` in one line and closed, and the next one awaited until the deadline. A peer `gate` refuses
  // (lib/net/peer_gate: logged there) is closed before the handshake, and the next one awaited.
  static ControlChannel accept_one(const std::string& bind, std::uint16_t port, Clock::time_point deadline, int stop_fd,
                                   const std::function<void(const std::string&)>& listening,
                                   const SharedKey* key = nullptr,
                                   const std::function<void(const std::string&)>& refused = {},
                                   PeerGate* gate = nullptr);
  ControlChannel(ControlChannel&& other) noexcept;
  ControlChannel& operator=(ControlChannel&&) = delete;
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;
  ~ControlChannel();

  void send(const nlohmann::json& message);
  // The next object; throws RunStopped at the deadline or on Ctrl-C, ProtocolError for
  // what is not one JSON object a frame, too long, or the peer gone, sealed::TamperedError
  // for a frame that fails its MAC.
  nlohmann::json receive(Clock::time_point deadline);
  const std::string& peer() const { return peer_; }
  // The address the peer's control connection came from (accept_one's side).
  const std::optional<IpAddress>& peer_address() const { return peer_address_; }

 private:
  class PendingHandshakes;
  ControlChannel(int fd, int stop_fd, std::string peer, std::optional<IpAddress> peer_address = std::nullopt)
      : fd_(fd), stop_fd_(stop_fd), peer_(std::move(peer)), peer_address_(peer_address) {}
  // After the handshake: its message keys (none when it was not keyed).
  void seal_with(const sealed::DirectionKeys& keys, const std::string& peer_role);
  int fd_;
  int stop_fd_;
  std::string peer_;
  std::optional<IpAddress> peer_address_;
  sealed::FrameWriter writer_;
  sealed::FrameReader reader_{std::nullopt, max_control_bytes, "the peer"};
  std::string buffered_;
};

// A run across two hosts, as the --peer side asks for it.
struct PeerPlan {
  // The forward cases: the serving side's address, this side's (local_address), the ports,
  // the tools; the reverse cases are reversed(forward).
  PlanOptions forward;
  bool run_forward = true;
  bool run_reverse = true;
};

// What the two sides agree on: the plan's options but the serving side's address, which
// that side knows itself.
nlohmann::json plan_request(const PeerPlan& plan);
// The serving side's view of the peer's request; throws ProtocolError for what does not fit.
// `control_peer`: where the request came from; the address this side's clients are to reach
// (the request's peer_address) must be that one: the serving side runs clients toward its
// control peer only, never at an address a request names.
PeerPlan plan_from_request(const nlohmann::json& request, const std::string& address,
                           const std::optional<IpAddress>& control_peer);
// The cases of a run across two hosts in the order they run: each tool's forward case,
// then its reverse one (whatever direction plan.forward says, its cases are the forward ones).
std::vector<SmokeCase> peer_cases(const PeerPlan& plan);

nlohmann::json to_json(const ToolRun& run);
// A run as the other side sent it, in the role it must have, every member checked; throws
// ProtocolError.
ToolRun tool_run_from_json(const nlohmann::json& item, const std::string& role);
// A run's shape and its schema definition (tests/unit/described_json_test.cpp).
std::vector<described::SchemaShape> tool_run_shapes();

struct ServeOptions {
  std::string address;  // where this side's servers listen
  std::string bind;     // the control port's address, "" for every address
  std::uint16_t control_port = default_control_port;
  double accept_seconds = 600;   // how long to wait for the peer
  std::optional<SharedKey> key;  // --key-file: the peer must prove it holds this key
  GateLimits peers;              // --allow: who may connect to the control port
};

struct ServeResult {
  std::vector<CaseResult> cases;      // the cases served, with their server runs
  std::string lost;                   // why the peer was lost before it said it was done; "" when it did
  std::uint64_t unauthenticated = 0;  // peers refused by the key handshake before the one served
  RefusedTally refused;               // peers refused by --allow before the one served
};

// Serves one peer's run: the servers of its forward cases, the clients of its reverse ones.
// Ends when the peer says it is done, goes away, or goes silent for longer than a case may
// take (the cases served so far are kept).
// `served` holds what was served and refused so far, also when this throws (Ctrl-C, no
// allowed peer within the accept timeout).
void serve_smoke(const ServeOptions& options, const RunEnvironment& environment,
                 const std::function<void(const std::string&)>& say, ServeResult& served);

// The --peer side of a run: a forward case's client runs here against its servers there, a
// reverse case's servers here for its client there.
class PeerSession {
 public:
  // Agrees on the plan with the serving side; throws ProtocolError when it plans otherwise.
  PeerSession(ControlChannel channel, const PeerPlan& plan);
  CaseResult run_case(const SmokeCase& smoke_case, const RunEnvironment& environment);
  void done();

 private:
  CaseResult run_forward(const SmokeCase& smoke_case, const RunEnvironment& environment);
  CaseResult run_reverse(const SmokeCase& smoke_case, const RunEnvironment& environment);
  ControlChannel channel_;
};

}  // namespace rdmakit::smoke
