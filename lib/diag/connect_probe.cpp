#include "lib/diag/connect_probe.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/base/file_descriptor.hpp"
#include "lib/diag/agent_protocol.hpp"
#include "lib/diag/check_connection.hpp"
#include "lib/diag/connect_report.hpp"
#include "lib/diag/host_probe.hpp"
#include "lib/diag/probe_ticket.hpp"
#include "lib/net/key_handshake.hpp"
#include "lib/net/sealed_frames.hpp"
#include "lib/net/stream_io.hpp"
#include "lib/rdma/addressing.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/rdma/verbs.hpp"

namespace rdmakit::diag {

namespace {

// The step `timer` times, ended now.
ConnectStep done(const StepTimer& timer, StepStatus status, std::string detail = {}, int errnum = 0,
                 std::string event = {}) {
  ConnectStep step;
  step.name = timer.step();
  step.status = status;
  step.errnum = errnum;
  step.event = std::move(event);
  step.detail = std::move(detail);
  step.ms = timer.elapsed_ms();
  return step;
}

ConnectStep skipped(rdmakit::Step name, std::string why) {
  ConnectStep step;
  step.name = name;
  step.status = StepStatus::skipped;
  step.detail = std::move(why);
  return step;
}

std::string printable(std::span<const std::uint8_t> bytes) {
  std::string text;
  for (const auto byte : bytes) {
    if (byte == 0) break;
    text += std::isprint(byte) != 0 ? static_cast<char>(byte) : '.';
  }
  return text.substr(0, max_text_bytes);
}

std::string strip_prefix(const std::string& address) {
  return address.substr(0, address.find('/'));
}

std::string netdev_holding(const HostView& view, const std::string& address) {
  for (const auto& netdev : view.netdevs) {
    for (const auto& held : netdev.addresses) {
      if (strip_prefix(held) == address) return netdev.name;
    }
  }
  return {};
}

std::string gid_type_of(const HostView& view, const std::string& device, int port) {
  for (const auto& d : view.devices) {
    if (d.name != device) continue;
    for (const auto& p : d.ports) {
      if (p.number != port) continue;
      if (!p.roce_mode.empty()) return p.roce_mode;
      if (is_iwarp_port(p)) return "iWARP";
      return p.link_layer == "InfiniBand" ? "IB" : p.link_layer;
    }
  }
  return {};
}

// The kernel's resolution timeout: shorter than our wait for its event, so that an address
// nobody answers ends in the kernel's ADDR_ERROR (with the neighbour's state) rather than in
// our own timeout.
int kernel_timeout_ms(const RunLimits& limits) {
  return std::max(1, timeout_ms(limits.timeout) * 3 / 4);
}

// The outcome of awaiting one CM event: the event, or why none came.
struct Awaited {
  CmEventPtr event;
  StepStatus status = StepStatus::ok;  // or timeout, interrupted, failed
  std::string detail;
};

Awaited await_event(EventChannel& channel, const RunLimits& limits, const std::string& awaiting) {
  try {
    Awaited awaited;
    awaited.event = next_cm_event(channel, Clock::now() + limits.timeout, limits.stop_fd, awaiting);
    return awaited;
  } catch (const RunStopped& stopped) {
    Awaited awaited;
    awaited.status = stopped.reason() == StopReason::timed_out ? StepStatus::timeout : StepStatus::interrupted;
    awaited.detail = stopped.what();
    return awaited;
  }
}

// The step an awaited event ends: ok when it is `wanted`, else failed with the event's errno.
ConnectStep finish_step(const StepTimer& timer, const Awaited& awaited, rdma_cm_event_type wanted) {
  if (!awaited.event) return done(timer, awaited.status, awaited.detail);
  const auto& event = *awaited.event;
  const std::string name = rdma_event_str(event.event);
  if (event.event == wanted) return done(timer, StepStatus::ok, {}, 0, name);
  const int errnum = event.status < 0 ? -event.status : 0;
  // The errno speaks for itself in the report; a status that is none (a reject reason) is kept.
  return done(timer, StepStatus::failed, errnum != 0 ? std::string() : fmt::format("status {}", event.status), errnum,
              name);
}

void record_source(const ConnectCase& connect_case, const rdma_cm_id* id, ConnectAttempt& attempt) {
  attempt.source_address = address_of(rdma_get_local_addr(const_cast<rdma_cm_id*>(id))).host_string();
  attempt.source_netdev = netdev_holding(connect_case.local, attempt.source_address);
  if (id->verbs != nullptr) attempt.device = ibv_get_device_name(id->verbs->device);
  attempt.device_port = id->port_num;
  attempt.source_gid = rdmakit::gid_text(id->route.addr.addr.ibaddr.sgid);
  attempt.gid_type = gid_type_of(connect_case.local, attempt.device, attempt.device_port);
}

Rejection rejection_of(const rdma_cm_event& event) {
  Rejection rejection;
  rejection.reason = event.status;
  rejection.reason_text = agent::reject_reason_text(event.status);
  rejection.consumer = event.status == agent::reject_consumer_defined;
  const auto& conn = event.param.conn;
  if (rejection.consumer && conn.private_data != nullptr) {
    rejection.private_data = printable({static_cast<const std::uint8_t*>(conn.private_data), conn.private_data_len});
  }
  return rejection;
}

// The transfer's completion, or why none came within the bound.
DataCheck await_completion(ibv_cq* cq, DataCheck check, const RunLimits& limits, Clock::time_point started) {
  const auto deadline = started + limits.timeout;
  for (;;) {
    ibv_wc completion{};
    const int polled = ibv_poll_cq(cq, 1, &completion);
    if (polled < 0) {
      check.status = StepStatus::failed;
      check.detail = "ibv_poll_cq failed";
      return check;
    }
    if (polled == 1) {
      check.us = elapsed_ms(started) * 1000.0;
      check.status = completion.status == IBV_WC_SUCCESS ? StepStatus::ok : StepStatus::failed;
      if (completion.status != IBV_WC_SUCCESS) check.detail = ibv_wc_status_str(completion.status);
      return check;
    }
    if (Clock::now() >= deadline) {
      check.us = elapsed_ms(started) * 1000.0;
      check.status = StepStatus::timeout;
      check.detail = fmt::format("no completion within {} ms", limits.timeout.count());
      return check;
    }
    if (wait_readable({limits.stop_fd}, Clock::now() + std::chrono::microseconds(200)).has_value()) {
      check.status = StepStatus::interrupted;
      return check;
    }
  }
}

DataCheck transfer(CheckConnection& connection, const agent::Offer& offer, const char* operation, std::size_t bytes,
                   const RunLimits& limits) {
  DataCheck check;
  check.operation = operation;
  check.bytes = bytes;
  ibv_sge sge{.addr = connection.buffer->address(),
              .length = static_cast<std::uint32_t>(bytes),
              .lkey = connection.buffer->lkey()};
  ibv_send_wr request{};
  request.sg_list = &sge;
  request.num_sge = 1;
  request.send_flags = IBV_SEND_SIGNALED;
  const std::string_view name = operation;
  request.opcode = name == "send" ? IBV_WR_SEND : name == "write" ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
  request.wr.rdma.remote_addr = offer.address;
  request.wr.rdma.rkey = offer.rkey;
  ibv_send_wr* bad = nullptr;
  const auto started = Clock::now();
  if (const int rc = ibv_post_send(connection.id->qp, &request, &bad); rc != 0) {
    check.status = StepStatus::failed;
    check.detail = fmt::format("ibv_post_send: {}", std::strerror(rc));
    return check;
  }
  return await_completion(connection.cq->get(), check, limits, started);
}

// SEND, WRITE and READ at 64 B, at the path MTU and at 64 KiB; after the first failure the QP
// is in error and the rest are skipped.
std::vector<DataCheck> check_data(CheckConnection& connection, const agent::Offer& offer, int path_mtu,
                                  const RunLimits& limits) {
  std::vector<DataCheck> checks;
  std::vector<std::size_t> sizes = {64};
  if (path_mtu > 64) sizes.push_back(static_cast<std::size_t>(path_mtu));
  sizes.push_back(agent::check_buffer_bytes);
  std::string failed;
  std::size_t sends = 0;
  for (const auto bytes : sizes) {
    for (const char* operation : {"send", "write", "read"}) {
      const bool is_send = std::string_view(operation) == "send";
      if (!failed.empty() || (is_send && sends >= offer.receives)) {
        DataCheck skipped_check;
        skipped_check.operation = operation;
        skipped_check.bytes = bytes;
        skipped_check.status = StepStatus::skipped;
        skipped_check.detail = failed.empty() ? "the agent posted no more receives" : failed;
        checks.push_back(skipped_check);
        continue;
      }
      if (is_send) ++sends;
      checks.push_back(transfer(connection, offer, operation, bytes, limits));
      if (checks.back().status != StepStatus::ok) {
        failed = fmt::format("after the {} of {} bytes failed", operation, bytes);
      }
    }
  }
  return checks;
}

void disconnect(CheckConnection& connection, EventChannel& channel, const RunLimits& limits, ConnectAttempt& attempt) {
  const StepTimer timer(rdmakit::Step::disconnect);
  if (rdma_disconnect(connection.id.get()) != 0) {
    attempt.steps.push_back(done(timer, StepStatus::failed, {}, errno));
    return;
  }
  const auto awaited = await_event(channel, limits, "the disconnect to complete");
  attempt.steps.push_back(finish_step(timer, awaited, RDMA_CM_EVENT_DISCONNECTED));
}

bool stopped(const ConnectAttempt& attempt) {
  return attempt.steps.back().status != StepStatus::ok;
}

// rdma_connect with the agent's hello, and the step it ends in; no event when it failed at once.
Awaited connect_step(CheckConnection& connection, EventChannel& channel, const ConnectProbeOptions& options,
                     ConnectAttempt& attempt, const std::string& awaiting) {
  agent::Hello greeting;
  if (options.key) {
    greeting.ticket =
        agent::make_ticket(*options.key, ticket_scope(connection.id.get(), ProbeEnd::client), agent::WallClock::now());
  }
  const auto hello = agent::encode_hello(greeting);
  ConnectOffer offer_to_agent;
  offer_to_agent.private_data = hello;
  auto parameters = connection_parameters(offer_to_agent);
  const StepTimer timer(rdmakit::Step::connect);
  if (rdma_connect(connection.id.get(), &parameters) != 0) {
    attempt.steps.push_back(done(timer, StepStatus::failed, {}, errno));
    return Awaited{.event = {}, .status = StepStatus::failed, .detail = {}};
  }
  auto awaited = await_event(channel, options.limits, awaiting);
  attempt.steps.push_back(finish_step(timer, awaited, RDMA_CM_EVENT_ESTABLISHED));
  return awaited;
}

// The SIDR reply's status (IBTA 12.11.2) when it is not success; the kernel passes it on as the
// UNREACHABLE event's status.
constexpr int sidr_service_unsupported = 1;  // nothing listens on that service ID
constexpr int sidr_rejected = 2;

// In the UDP port space "connect" is a service ID resolution (SIDR) for a UD QP: a reply
// without a listener comes back as UNREACHABLE with status 1, the UD counterpart of REJ
// reason 8, and is recorded as that rejection so the verdict treats both port spaces alike.
// There is no connection to check data over, nor to disconnect.
void resolve_service(CheckConnection& connection, EventChannel& channel, const ConnectProbeOptions& options,
                     ConnectAttempt& attempt) {
  connection.create(0, IBV_QPT_UD);
  const auto awaited = connect_step(connection, channel, options, attempt, "the service ID resolution (SIDR) reply");
  if (!awaited.event) return;
  const auto& event = *awaited.event;
  if (event.event == RDMA_CM_EVENT_ESTABLISHED) {
    attempt.steps.back().detail =
        fmt::format("SIDR reply: UD QPN {}, qkey {:#x}", event.param.ud.qp_num, event.param.ud.qkey);
    return;
  }
  if (event.event != RDMA_CM_EVENT_UNREACHABLE) return;
  if (event.status == sidr_service_unsupported || event.status == sidr_rejected) {
    Rejection rejection;
    rejection.consumer = event.status == sidr_rejected;
    rejection.reason = rejection.consumer ? agent::reject_consumer_defined : agent::reject_invalid_service_id;
    rejection.reason_text = rejection.consumer ? "SIDR reply status 2: rejected by the application"
                                               : "SIDR reply status 1: nothing listens on the service ID";
    attempt.steps.back().detail = rejection.reason_text;
    attempt.rejection = rejection;
  }
}

// Connects and, when the agent answered, checks the data path; the attempt holds each step.
void connect_and_check(ConnectCase& connect_case, CheckConnection& connection, EventChannel& channel,
                       const ConnectProbeOptions& options) {
  auto& attempt = connect_case.attempt;
  if (connection.id->ps == RDMA_PS_UDP) {
    resolve_service(connection, channel, options, attempt);
    return;
  }
  connection.create(0);
  const auto awaited = connect_step(connection, channel, options, attempt, "the connection to be accepted or rejected");
  if (awaited.event && awaited.event->event == RDMA_CM_EVENT_REJECTED) {
    attempt.rejection = rejection_of(*awaited.event);
    attempt.steps.back().detail = attempt.rejection->reason_text;
  }
  if (stopped(attempt)) return;
  const auto& conn = awaited.event->param.conn;
  std::optional<agent::Offer> offer;
  try {
    offer = agent::decode_offer({static_cast<const std::uint8_t*>(conn.private_data), conn.private_data_len});
  } catch (const ProtocolError& bad) {
    attempt.steps.back().detail = fmt::format("the agent's offer is unusable: {}", bad.what());
  }
  attempt.peer_is_agent = offer.has_value();
  if (offer) attempt.data = check_data(connection, *offer, attempt.path_mtu, options.limits);
  disconnect(connection, channel, options.limits, attempt);
}

SocketAddress numeric_address(const std::string& host, std::uint16_t port) {
  return parse_address(host, port);
}

// What `ip route get` would print of it.
std::string route_text(const RouteInfo& route) {
  std::string text = "dev " + route.netdev;
  if (!route.gateway.empty()) text += " via " + route.gateway;
  if (!route.source.empty()) text += " src " + route.source;
  return text;
}

void run_rdma_steps(ConnectCase& connect_case, const ConnectProbeOptions& options) {
  auto& attempt = connect_case.attempt;
  EventChannel channel;
  CheckConnection connection;
  connection.id = CmId(channel, parse_port_space(options.port_space));
  const auto destination = numeric_address(options.target, options.port);
  std::optional<SocketAddress> source;
  if (!options.bind.empty()) source = numeric_address(options.bind, 0);
  const StepTimer resolve_timer(rdmakit::Step::resolve_addr);
  if (rdma_resolve_addr(connection.id.get(), source ? source->get() : nullptr, const_cast<sockaddr*>(destination.get()),
                        kernel_timeout_ms(options.limits)) != 0) {
    attempt.steps.push_back(done(resolve_timer, StepStatus::failed, {}, errno));
    return;
  }
  const auto resolved = await_event(channel, options.limits, "address resolution");
  attempt.steps.push_back(finish_step(resolve_timer, resolved, RDMA_CM_EVENT_ADDR_RESOLVED));
  const auto& route = connect_case.local.route;
  const std::string next_hop = route && !route->gateway.empty() ? route->gateway : options.target;
  connect_case.local.neighbour = neighbour_of(next_hop, route ? route->netdev : std::string());
  if (stopped(attempt)) return;
  record_source(connect_case, connection.id.get(), attempt);
  const StepTimer route_timer(rdmakit::Step::resolve_route);
  if (rdma_resolve_route(connection.id.get(), kernel_timeout_ms(options.limits)) != 0) {
    attempt.steps.push_back(done(route_timer, StepStatus::failed, {}, errno));
    return;
  }
  const auto routed = await_event(channel, options.limits, "route resolution");
  attempt.steps.push_back(finish_step(route_timer, routed, RDMA_CM_EVENT_ROUTE_RESOLVED));
  if (stopped(attempt)) return;
  if (connection.id->route.num_paths > 0) {
    attempt.path_mtu = static_cast<int>(mtu_bytes(static_cast<ibv_mtu>(connection.id->route.path_rec->mtu)));
  }
  connect_and_check(connect_case, connection, channel, options);
}

// ---- the side channel ----

AgentStatus contact_status(int errnum) {
  switch (errnum) {
    case ECONNREFUSED: return AgentStatus::refused;
    case ETIMEDOUT: return AgentStatus::timeout;
    case EHOSTUNREACH:
    case ENETUNREACH: return AgentStatus::unreachable;
    default: return AgentStatus::failed;
  }
}

// Fails with the errno of what went wrong; the deadline bounds it all.
std::string fetch_answer(const SocketAddress& agent, const std::string& request, const SharedKey* key,
                         Clock::time_point deadline, int stop_fd) {
  const auto length = static_cast<socklen_t>(agent.family() == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
  auto socket = [&] {
    try {
      return tcp::connect_to(agent.get(), length, deadline, stop_fd);
    } catch (const RunStopped&) {
      throw std::system_error(EINTR, std::generic_category(), "connect");
    }
  }();
  try {
    const auto keys = handshake::join_handshake(socket.get(), handshake::Service::agent, key, deadline, stop_fd);
    sealed::FrameWriter writer(keys.sending);
    if (!tcp::send_bytes(socket.get(), writer.seal(request), deadline, stop_fd)) {
      throw std::system_error(ETIMEDOUT, std::generic_category(), "sending the request");
    }
    sealed::FrameReader reader(keys.receiving, max_answer_bytes, "the agent");
    std::string buffered;
    auto answer = sealed::receive_frame(socket.get(), reader, buffered, deadline, stop_fd);
    if (!answer) throw std::system_error(ETIMEDOUT, std::generic_category(), "the answer");
    return std::move(*answer);
  } catch (const RunStopped&) {
    throw std::system_error(EINTR, std::generic_category(), "the exchange with the agent");
  }
}

}  // namespace

AgentContact ask_agent(const ConnectProbeOptions& options, const std::string& source,
                       std::optional<PeerAnswer>& answer) {
  const auto agent =
      numeric_address(options.agent_host.empty() ? options.target : options.agent_host, options.agent_port);
  AgentContact contact;
  contact.address = agent.to_string();
  const auto started = Clock::now();
  const auto request = agent::encode_request(
      {.address = options.target, .port = options.port, .port_space = options.port_space, .source = source});
  try {
    answer = parse_peer_answer(fetch_answer(agent, request, options.key ? &*options.key : nullptr,
                                            started + options.limits.timeout, options.limits.stop_fd));
    contact.status = AgentStatus::ok;
  } catch (const std::system_error& failed) {
    contact.status = failed.code().value() == EINTR ? AgentStatus::interrupted : contact_status(failed.code().value());
    contact.detail = failed.what();
  } catch (const handshake::AuthenticationError& refused) {
    contact.status = AgentStatus::unauthenticated;
    contact.detail = refused.what();
  } catch (const sealed::TamperedError& tampered) {
    contact.status = AgentStatus::tampered;
    contact.detail = tampered.what();
  } catch (const ProtocolError& invalid) {
    contact.status = AgentStatus::invalid;
    contact.detail = invalid.what();
  }
  contact.ms = elapsed_ms(started);
  return contact;
}

ConnectCase probe_connect(const ConnectProbeOptions& options) {
  ConnectCase connect_case;
  connect_case.siblings = options.siblings;
  auto& attempt = connect_case.attempt;
  attempt.target = options.target;
  attempt.port = options.port;
  attempt.port_space = options.port_space;
  attempt.bind = options.bind;
  connect_case.local = read_host_view(options.view);
  const StepTimer route_timer(rdmakit::Step::route);
  connect_case.local.route = route_to(options.target, options.bind);
  const auto& route = *connect_case.local.route;
  attempt.steps.push_back(route.errnum == 0 ? done(route_timer, StepStatus::ok, route_text(route))
                                            : done(route_timer, StepStatus::failed, {}, route.errnum));
  if (route.errnum == 0) {
    try {
      run_rdma_steps(connect_case, options);
    } catch (const RdmaError& failed) {
      // No device, no rdma_cm, a QP or memory the device refused: the step under way
      // failed with the call's errno; the verdict still gets everything before it.
      ConnectStep step;
      step.name =
          attempt.find(rdmakit::Step::resolve_addr) == nullptr ? rdmakit::Step::resolve_addr : rdmakit::Step::connect;
      step.status = StepStatus::failed;
      step.errnum = failed.errnum();
      step.detail = failed.call();
      attempt.steps.push_back(step);
    }
  }
  for (const auto later : {rdmakit::Step::resolve_addr, rdmakit::Step::resolve_route, rdmakit::Step::connect}) {
    if (attempt.find(later) == nullptr) attempt.steps.push_back(skipped(later, "an earlier step did not succeed"));
  }
  const auto resolved = [&attempt](rdmakit::Step name) {
    const auto* step = attempt.find(name);
    return step == nullptr || step->status == StepStatus::ok || step->status == StepStatus::skipped;
  };
  if (!resolved(rdmakit::Step::resolve_addr) || !resolved(rdmakit::Step::resolve_route)) {
    // The same checks diag-bind makes, on the address this side binds or resolves.
    const auto address = options.bind.empty() ? options.target : options.bind;
    const auto target = make_target(address, 0, options.port_space);
    ProbeOptions host_probe;
    host_probe.limits = options.limits;
    host_probe.siblings = options.siblings;
    connect_case.host =
        diagnose(target, collect_inventory(host_probe), run_attempt(target, host_probe), options.siblings);
  }
  const bool interrupted = std::any_of(attempt.steps.begin(), attempt.steps.end(),
                                       [](const ConnectStep& step) { return step.status == StepStatus::interrupted; });
  if (options.ask_agent && !interrupted) {
    const auto source = !attempt.source_address.empty() ? attempt.source_address
                        : !options.bind.empty()         ? options.bind
                                                        : route.source;
    connect_case.agent = ask_agent(options, source, connect_case.peer);
  }
  return connect_case;
}

nlohmann::json diagnose_connect_failure(const std::string& address, std::uint16_t port,
                                        std::chrono::milliseconds timeout, const SiblingNames& siblings,
                                        std::string& text, const std::string& port_space) {
  ConnectProbeOptions options;
  options.target = parse_address(address, 0).host_string();
  options.port = port != 0 ? port : agent::default_probe_port;
  options.port_space = port_space;
  options.agent_port = agent::default_agent_port;
  options.limits.timeout = timeout;
  options.siblings = siblings;
  const auto connect_case = probe_connect(options);
  const auto verdict = diagnose_connect(connect_case);
  text = render_connect_verdict(verdict, siblings);
  return {{"tool", "diag-connect"}, {"capture", to_json(connect_case)}, {"verdict", to_json(verdict)}};
}

}  // namespace rdmakit::diag
