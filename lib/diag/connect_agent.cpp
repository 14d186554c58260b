#include "lib/diag/connect_agent.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/base/file_descriptor.hpp"
#include "lib/diag/agent_protocol.hpp"
#include "lib/diag/check_connection.hpp"
#include "lib/diag/probe_ticket.hpp"
#include "lib/net/key_handshake.hpp"
#include "lib/net/sealed_frames.hpp"
#include "lib/net/stream_io.hpp"
#include "lib/rdma/addressing.hpp"
#include "lib/rdma/cm.hpp"

namespace rdmakit::diag {

namespace {

// SENDs a client may make: one each at 64 B, at the path MTU and at 64 KiB.
constexpr std::uint16_t receives_per_connection = 3;
// Side-channel clients served at once, and from one address (several diag-connect runs of one
// host at once: rdma_mesh's ranks, tsan_agent's three): each has a thread, one overall
// deadline for its handshake and request, and its answer's own; the rest are closed at accept.
constexpr std::size_t max_side_clients = 16;
constexpr std::size_t max_side_clients_per_address = 4;
constexpr int tcp_backlog = 16;
constexpr int cm_backlog = 8;
constexpr std::chrono::milliseconds housekeeping_interval{250};

template <typename Items>
void cap(Items& items) {
  if (items.size() > max_list_entries) items.resize(max_list_entries);
}

void cap(std::string& text) {
  if (text.size() > max_text_bytes) text.resize(max_text_bytes);
}

// Keeps the answer within what the client reads (lists and strings of bounded size).
void bound(HostView& view) {
  cap(view.devices);
  for (auto& device : view.devices) {
    cap(device.ports);
    for (auto& port : device.ports) cap(port.gids);
  }
  cap(view.netdevs);
  for (auto& netdev : view.netdevs) cap(netdev.addresses);
  cap(view.firewall.rules);
  for (auto& rule : view.firewall.rules) cap(rule.text);
  cap(view.firewall.drop_policy_chains);
  cap(view.listeners);
}

std::string plain_address(const sockaddr* address) {
  auto text = address_of(address).host_string();
  constexpr std::string_view mapped = "::ffff:";
  if (text.starts_with(mapped) && text.find('.') != std::string::npos) text.erase(0, mapped.size());
  return text;
}

class Agent {
 public:
  Agent(const AgentOptions& options, const std::function<void(const std::string&)>& log)
      : options_(options), log_(log), tcp_(open_tcp()) {
    if (options_.listen_rdma) open_rdma();
  }

  std::string where() const {
    return fmt::format("diag-connect agent: side channel on TCP {}{}", tcp_address_,
                       options_.listen_rdma
                           ? fmt::format(", probes on rdma_cm {} ({})", cm_address_, options_.port_space)
                           : std::string(", no rdma_cm listener (--no-listen)"));
  }

  AgentTally run() {
    for (;;) {
      std::vector<int> fds = {tcp_.get()};
      if (channel_) fds.push_back(channel_->fd());
      if (options_.stop_fd >= 0) fds.push_back(options_.stop_fd);
      std::vector<pollfd> polled;
      polled.reserve(fds.size());
      for (const int fd : fds) polled.push_back(pollfd{.fd = fd, .events = POLLIN, .revents = 0});
      const int ready = poll(polled.data(), polled.size(), static_cast<int>(housekeeping_interval.count()));
      if (ready < 0 && errno != EINTR) throw std::system_error(errno, std::generic_category(), "poll");
      if (options_.stop_fd >= 0 && (polled.back().revents & POLLIN) != 0) break;
      if ((polled[0].revents & POLLIN) != 0) take_side_clients();
      if (channel_ && (polled[1].revents & POLLIN) != 0) drain_cm_events();
      expire_connections();
    }
    end_side_clients();
    held_.clear();
    tally_.refused = gate_.refused();
    return tally_;
  }

 private:
  struct Held {
    std::unique_ptr<CheckConnection> connection;
    Clock::time_point since;
    bool disconnecting = false;
  };

  FileDescriptor open_tcp() {
    const bool any = options_.bind.empty();
    auto address = parse_address(any ? "::" : options_.bind, options_.agent_port);
    // Non-blocking: each wake-up takes what waits in the accept queue, until it is empty.
    const auto length = address.family() == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    auto socket = tcp::listen_on(address.get(), static_cast<socklen_t>(length), tcp_backlog,
                                 fmt::format("the side channel to TCP {}", address.to_string()));
    tcp_address_ = address.to_string();
    return socket;
  }

  void open_rdma() {
    channel_ = std::make_unique<EventChannel>();
    listener_ = CmId(*channel_, parse_port_space(options_.port_space));
    // "::" takes IPv4 too (rdma_cm follows net.ipv6.bindv6only, 0 by default).
    auto address = parse_address(options_.bind.empty() ? "::" : options_.bind, options_.probe_port);
    cm_address_ = address.to_string();
    check_errno(rdma_bind_addr(listener_.get(), address.get()), "rdma_bind_addr", cm_address_, address.host_string());
    check_errno(rdma_listen(listener_.get(), cm_backlog), "rdma_listen", cm_address_);
  }

  // One side-channel client, served on a thread of its own so that a slow or silent one
  // never delays another, or the probes' rdma_cm events.
  struct SideClient {
    SideClient(FileDescriptor accepted, std::string from, PeerGate::Slot held_seat)
        : socket(std::move(accepted)), address(std::move(from)), seat(std::move(held_seat)) {}
    FileDescriptor socket;
    std::string address;
    PeerGate::Slot seat;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  // Everything in the accept queue, up to a batch, so that a flood of connections is refused
  // at the rate they can be closed rather than one per turn of the loop; the probes' rdma_cm
  // events are taken between batches.
  void take_side_clients() {
    constexpr int batch = 64;
    for (int taken = 0; taken < batch; ++taken) {
      auto accepted = tcp::accept_waiting(tcp_.get());
      if (!accepted) return;
      take_side_client(std::move(accepted->socket), accepted->peer);
    }
  }

  void take_side_client(FileDescriptor client, const sockaddr_storage& peer) {
    const auto* from = reinterpret_cast<const sockaddr*>(&peer);
    // Refused: logged by the gate and closed at once, before a byte is read.
    if (!gate_.admit(from, Clock::now()).admitted()) return;
    reap_side_clients();
    auto seat = side_seats_.admit(from, Clock::now());
    if (!seat.admitted()) {
      const std::lock_guard lock(shared_);
      ++tally_.busy;  // logged by side_seats_, at its rate
      return;
    }
    auto held = std::make_unique<SideClient>(std::move(client), plain_address(from), std::move(seat.slot));
    SideClient& side = *held;
    side.thread = std::thread([this, &side] {
      serve_side_client(side.socket.get(), side.address, Clock::now() + options_.client_timeout);
      // The client reads its answer to the end: the end is now, though the descriptor is
      // closed only when the thread is reaped.
      shutdown(side.socket.get(), SHUT_RDWR);
      side.done = true;
    });
    side_clients_.push_back(std::move(held));
  }

  void reap_side_clients() {
    std::erase_if(side_clients_, [](const std::unique_ptr<SideClient>& held) {
      if (!held->done) return false;
      held->thread.join();
      return true;
    });
  }

  // At the stop: every client's socket shut down, so that its thread's next wait ends.
  void end_side_clients() {
    for (const auto& held : side_clients_) shutdown(held->socket.get(), SHUT_RDWR);
    for (const auto& held : side_clients_) held->thread.join();
    side_clients_.clear();
  }

  void serve_side_client(int fd, const std::string& client_address, Clock::time_point deadline) {
    const auto keys = authenticated(fd, client_address, deadline);
    if (!keys) return;
    try {
      sealed::FrameReader reader(keys->receiving, agent::max_request_bytes, "the client");
      std::string buffered;
      // No stop descriptor here: at the stop, end_side_clients shuts the socket down.
      const auto request_bytes = sealed::receive_frame(fd, reader, buffered, deadline, -1);
      if (!request_bytes) throw ProtocolError("the request did not arrive in time");
      const auto request = agent::decode_request(*request_bytes);
      auto answer = answer_for(options_, client_address, request.source);
      sealed::FrameWriter writer(keys->sending);
      // The client's time to read starts once the answer is ready: building it (this host's
      // view, the nftables ruleset too) took a sanitized agent on a loaded host past the
      // whole timeout, and it hung up on a client that was still waiting.
      if (!tcp::send_bytes(fd,
                           writer.seal(to_json(answer).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)),
                           Clock::now() + options_.client_timeout, -1)) {
        throw ProtocolError("the client did not read the answer in time");
      }
      const std::lock_guard lock(shared_);
      ++tally_.answers;
      log_(fmt::format("answered {} (probing {} port {})", client_address, request.address, request.port));
    } catch (const ProtocolError& bad) {
      const std::lock_guard lock(shared_);
      ++tally_.bad_requests;
      log_(fmt::format("refused {}: {}", client_address, bad.what()));
    }
  }

  // The key handshake, by the client's deadline: this side's message keys, or nullopt (logged,
  // counted, nothing served) when the client did not prove it holds the key, or holds one this
  // agent has not.
  std::optional<sealed::DirectionKeys> authenticated(int fd, const std::string& client_address,
                                                     Clock::time_point deadline) {
    try {
      return handshake::serve_handshake(fd, handshake::Service::agent, options_.key ? &*options_.key : nullptr,
                                        deadline, options_.stop_fd);
    } catch (const handshake::AuthenticationError& refused) {
      const std::lock_guard lock(shared_);
      ++tally_.unauthenticated;
      log_(fmt::format("refused {}: handshake: {}", client_address, refused.what()));
    } catch (const RunStopped&) {
      return std::nullopt;  // Ctrl-C during a handshake: the loop sees the stop descriptor next
    }
    return std::nullopt;
  }

  void drain_cm_events() {
    while (auto event = poll_cm_event(*channel_)) {
      handle(*event);
      event.reset();  // acked: the ids it named may now be destroyed
      graveyard_.clear();
    }
  }

  void reject(rdma_cm_id* id, const std::string& why) {
    {
      const std::lock_guard lock(shared_);
      ++tally_.rejected;
      log_(fmt::format("rejected a connection: {}", why));
    }
    bury_rejected(id, why);
  }

  // How its refusals and errors name it: as its clients would run it.
  std::string agent_name() const { return options_.siblings.diag_connect() + " agent"; }

  std::optional<std::string> ticket_refusal(const agent::Hello& hello, rdma_cm_id* id) {
    if (!hello.ticket) {
      return fmt::format("this agent is keyed: probes need a ticket ({} --key-file)", options_.siblings.diag_connect());
    }
    return tickets_->refusal(*hello.ticket, ticket_scope(id, ProbeEnd::agent), agent::WallClock::now());
  }

  static std::string printable_peer(rdma_cm_id* id) {
    const auto peer = IpAddress::of(rdma_get_peer_addr(id));
    return peer ? peer->to_string() : "a non-IP address";
  }

  // Rejects with `why` in the private data, the text diag-connect prints.
  void bury_rejected(rdma_cm_id* id, const std::string& why) {
    rdma_reject(id, why.c_str(), static_cast<std::uint8_t>(std::min<std::size_t>(why.size() + 1, 148)));
    auto dead = std::make_unique<CheckConnection>();
    dead->id = CmId(id);
    graveyard_.push_back(std::move(dead));
  }

  void take_request(const rdma_cm_event& event) {
    const auto admission = gate_.admit(rdma_get_peer_addr(event.id), Clock::now());
    if (!admission.admitted()) {
      bury_rejected(event.id, agent_name() + ": " + admission.reason);
      return;
    }
    const auto& conn = event.param.conn;
    const auto hello =
        agent::decode_hello({static_cast<const std::uint8_t*>(conn.private_data), conn.private_data_len});
    if (!hello) {
      reject(event.id, fmt::format("{}: not a {} client", agent_name(), options_.siblings.diag_connect()));
      return;
    }
    // Keyed: the ticket before a slot, so that a host without the key holds none.
    if (tickets_) {
      if (auto why = ticket_refusal(*hello, event.id)) {
        {
          const std::lock_guard lock(shared_);
          ++tally_.unticketed;
          log_(fmt::format("rejected a probe from {}: {}", printable_peer(event.id), *why));
        }
        bury_rejected(event.id, agent_name() + ": " + *why);
        return;
      }
    }
    if (held_.size() >= options_.max_connections) {
      reject(event.id, fmt::format("{}: busy, {} probes at once", agent_name(), held_.size()));
      return;
    }
    auto connection = std::make_unique<CheckConnection>();
    connection->id = CmId(event.id);
    // --ps udp: a SIDR request, answered with a UD QP's number and Q_Key (an RC QP's number
    // in a SIDR reply names nothing a datagram can reach). SIDR ends with the reply: there is
    // no connection to hold, so it takes no probe slot.
    const bool datagram = event.id->ps == RDMA_PS_UDP;
    try {
      connection->create(datagram ? 0 : receives_per_connection, datagram ? IBV_QPT_UD : IBV_QPT_RC);
      const auto offer = agent::encode_offer({.address = connection->buffer->address(),
                                              .rkey = connection->buffer->rkey(),
                                              .length = agent::check_buffer_bytes,
                                              .receives = receives_per_connection});
      ConnectOffer accept_offer;
      accept_offer.private_data = offer;
      auto parameters = connection_parameters(accept_offer);
      check_errno(rdma_accept(event.id, &parameters), "rdma_accept", agent_name());
      if (datagram) {
        const std::lock_guard lock(shared_);
        ++tally_.connections;
        log_("answered a service ID resolution (SIDR)");
        graveyard_.push_back(std::move(connection));
        return;
      }
      held_[event.id] = Held{.connection = std::move(connection), .since = Clock::now()};
    } catch (const RdmaError& failed) {
      const std::lock_guard lock(shared_);
      log_(fmt::format("could not accept a probe: {}", failed.what()));
      graveyard_.push_back(std::move(connection));
    }
  }

  void handle(const rdma_cm_event& event) {
    switch (event.event) {
      case RDMA_CM_EVENT_CONNECT_REQUEST: take_request(event); return;
      case RDMA_CM_EVENT_ESTABLISHED: {
        const std::lock_guard lock(shared_);
        ++tally_.connections;
        log_("probe connection established");
        return;
      }
      case RDMA_CM_EVENT_DISCONNECTED:
      case RDMA_CM_EVENT_CONNECT_ERROR:
      case RDMA_CM_EVENT_UNREACHABLE:
      case RDMA_CM_EVENT_REJECTED:
      case RDMA_CM_EVENT_DEVICE_REMOVAL: release(event.id); return;
      default: return;
    }
  }

  void release(rdma_cm_id* id) {
    const auto found = held_.find(id);
    if (found == held_.end()) return;
    if (!found->second.disconnecting) rdma_disconnect(id);
    graveyard_.push_back(std::move(found->second.connection));
    held_.erase(found);
  }

  void expire_connections() {
    for (auto& [id, held] : held_) {
      if (held.disconnecting || Clock::now() - held.since < options_.connection_lifetime) continue;
      {
        const std::lock_guard lock(shared_);
        ++tally_.expired;
        log_("dropped a probe connection held past its lifetime");
      }
      rdma_disconnect(id);
      held.disconnecting = true;
    }
  }

  const AgentOptions& options_;
  const std::function<void(const std::string&)>& log_;
  PeerGate gate_{options_.peers};
  std::optional<agent::TicketBook> tickets_ =
      options_.key ? std::optional<agent::TicketBook>(std::in_place, *options_.key) : std::nullopt;
  // The side channel's seats: who the allow list and rate admitted, up to the caps at once.
  PeerGate side_seats_{
      GateLimits{.allow = {}, .max_clients = max_side_clients, .max_per_peer = max_side_clients_per_address}};
  std::string tcp_address_;  // before tcp_: open_tcp() sets it
  std::string cm_address_;
  FileDescriptor tcp_;
  std::unique_ptr<EventChannel> channel_;
  CmId listener_;
  std::map<rdma_cm_id*, Held> held_;
  std::vector<std::unique_ptr<CheckConnection>> graveyard_;
  std::vector<std::unique_ptr<SideClient>> side_clients_;  // the main thread's only
  std::mutex shared_;                                      // tally_ and log_, between the threads
  AgentTally tally_;
};

}  // namespace

PeerAnswer answer_for(const AgentOptions& options, const std::string& client_address, const std::string& source) {
  PeerAnswer answer;
  answer.view = read_host_view(options.view);
  answer.client_address = client_address;
  const auto back_to = source.empty() ? client_address : source;
  answer.view.route = route_to(back_to, "");
  const auto& route = *answer.view.route;
  if (route.errnum == 0) {
    answer.view.neighbour = neighbour_of(route.gateway.empty() ? back_to : route.gateway, route.netdev);
  }
  answer.serving = options.listen_rdma;
  answer.serving_port = options.probe_port;
  answer.serving_port_space = options.port_space;
  answer.serving_address = options.bind.empty() ? "::" : options.bind;
  bound(answer.view);
  return answer;
}

void AgentTallyResult::add_to(nlohmann::json& document) const {
  document["agent"] = {
      {"answers", tally_.answers}, {"bad_requests", tally_.bad_requests}, {"unauthenticated", tally_.unauthenticated},
      {"busy", tally_.busy},       {"connections", tally_.connections},   {"rejected", tally_.rejected},
      {"expired", tally_.expired}, {"unticketed", tally_.unticketed}};
}

std::string AgentTallyResult::text() const {
  return fmt::format(
      "agent stopped: {} views answered, {} requests refused, {} clients refused by the key handshake, {} closed "
      "as too many at once, {} probe connections, {} rejected, {} rejected for their ticket, {} dropped at their "
      "lifetime\n",
      tally_.answers, tally_.bad_requests, tally_.unauthenticated, tally_.busy, tally_.connections, tally_.rejected,
      tally_.unticketed, tally_.expired);
}

AgentTally serve_agent(const AgentOptions& options, const std::function<void(const std::string&)>& ready,
                       const std::function<void(const std::string&)>& log) {
  Agent agent(options, log);
  ready(agent.where());
  if (!options.peers.allow.any()) ready(answering_line(options.peers.allow));
  return agent.run();
}

}  // namespace rdmakit::diag
