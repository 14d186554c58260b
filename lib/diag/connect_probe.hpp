#pragma once
// The live side of diag-connect on the client host: the real rdma_cm attempt, step by step
// and timed (route, resolve_addr, resolve_route, connect, the data check), this host's
// view, and the agent's answer over the TCP side channel. lib/diag/connect_diagnosis.hpp
// turns what this returns into a verdict.

#include <cstdint>
#include <optional>
#include <string>

#include "lib/base/wait.hpp"
#include "lib/diag/connect_diagnosis.hpp"
#include "lib/diag/host_view.hpp"
#include "lib/net/shared_key.hpp"

namespace rdmakit::diag {

struct ConnectProbeOptions {
  std::string target;  // numeric address
  std::uint16_t port = 0;
  std::string port_space = "tcp";
  std::string bind;        // source address, "" for the kernel's choice
  std::string agent_host;  // "" : the target
  std::uint16_t agent_port = 0;
  bool ask_agent = true;
  // Each step's bound (resolve, connect, each transfer, the agent's answer); Ctrl-C ends
  // the step under way and the run reports what it has.
  RunLimits limits;
  HostViewOptions view;
  // --key-file: proven to the agent, which must prove it too, before the request is sent
  // (lib/net/key_handshake); a refusal is the contact's status "unauthenticated", an answer
  // that fails its MAC after it (lib/net/sealed_frames) "tampered".
  std::optional<SharedKey> key;
  // How the verdicts' next steps name diag-bind and diag-connect.
  SiblingNames siblings;
};

ConnectCase probe_connect(const ConnectProbeOptions& options);

// For --diagnose in the other tools: diag-connect's diagnosis of `address` (port 0: the
// agent's default probe port) in `port_space` ("tcp" or "udp": a SIDR exchange), asking the
// agent at its default port, as JSON with the human verdict in `text`.
nlohmann::json diagnose_connect_failure(const std::string& address, std::uint16_t port,
                                        std::chrono::milliseconds timeout, const SiblingNames& siblings,
                                        std::string& text, const std::string& port_space = "tcp");

// What the agent answers, fetched over TCP; never throws: the contact says how it went.
AgentContact ask_agent(const ConnectProbeOptions& options, const std::string& source,
                       std::optional<PeerAnswer>& answer);

}  // namespace rdmakit::diag
