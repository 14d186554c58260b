#pragma once
// `diag-connect --serve`: the agent on the server host. It listens on rdma_cm (the probe's
// target: it accepts diag-connect clients and offers them a buffer for the data check) and
// on a TCP port that answers one request with this host's read-only view
// (lib/diag/connect_diagnosis.hpp's PeerAnswer). It runs nothing for a caller, binds only
// where told, answers at most diag::max_answer_bytes, serves one side-channel client at a
// time within a bound, and holds at most `max_connections` probe connections, each for at
// most `connection_lifetime`.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "lib/base/report.hpp"
#include "lib/diag/connect_diagnosis.hpp"
#include "lib/diag/host_view.hpp"
#include "lib/net/peer_gate.hpp"
#include "lib/net/shared_key.hpp"

namespace rdmakit::diag {

struct AgentOptions {
  std::string bind;  // both listeners' address; "" : every address
  std::uint16_t probe_port = 0;
  std::string port_space = "tcp";
  std::uint16_t agent_port = 0;
  bool listen_rdma = true;
  std::size_t max_connections = 4;
  std::chrono::milliseconds client_timeout{2000};
  std::chrono::milliseconds connection_lifetime{30000};
  int stop_fd = -1;
  HostViewOptions view;
  // --key-file: a side-channel client must prove it holds this key (lib/net/key_handshake)
  // before its request is read, and a probe by its hello's ticket (lib/diag/probe_ticket)
  // before it takes a slot; none: anyone who connects is served, as the warning at start says.
  std::optional<SharedKey> key;
  // Who may connect to either listener (--allow, --peer-rate); max_connections stays the
  // probes' cap.
  GateLimits peers;
  // How the refusals sent to clients name diag-connect.
  SiblingNames siblings;
};

struct AgentTally {
  std::uint64_t answers = 0;          // side-channel requests answered
  std::uint64_t bad_requests = 0;     // side-channel requests refused (garbage, too long, too slow)
  std::uint64_t unauthenticated = 0;  // side-channel clients refused by the key handshake
  std::uint64_t busy = 0;             // side-channel clients closed at accept: too many at once
  std::uint64_t connections = 0;      // probe connections accepted
  std::uint64_t rejected = 0;         // refused: not a diag-connect client, or too many at once
  std::uint64_t unticketed = 0;       // keyed: probes refused for their ticket, before any slot
  std::uint64_t expired = 0;          // dropped after connection_lifetime
  RefusedTally refused;               // refused by the gate (--allow, --peer-rate) on either listener
};

// The agent's report: what it served.
class AgentTallyResult final : public ReportSection {
 public:
  explicit AgentTallyResult(AgentTally tally) : tally_(tally) {}
  void add_to(nlohmann::json& document) const override;
  std::string text() const override;

 private:
  AgentTally tally_;
};

// The answer to one side-channel request, as the agent would send it (bounded).
PeerAnswer answer_for(const AgentOptions& options, const std::string& client_address, const std::string& source);

// Serves until the stop descriptor fires. `ready` is called once both listeners listen, with
// a line saying where. Throws RdmaError / std::system_error when a listener cannot be set up.
AgentTally serve_agent(const AgentOptions& options, const std::function<void(const std::string&)>& ready,
                       const std::function<void(const std::string&)>& log);

}  // namespace rdmakit::diag
