#include "lib/smoke/remote.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "lib/base/described_json.hpp"
#include "lib/base/error.hpp"
#include "lib/base/file_descriptor.hpp"
#include "lib/base/untrusted_json.hpp"
#include "lib/base/wait.hpp"
#include "lib/net/key_handshake.hpp"
#include "lib/net/sealed_frames.hpp"
#include "lib/net/stream_io.hpp"
#include "lib/smoke/smoke_json.hpp"

namespace rdmakit::smoke {

namespace {

// How long the serving side waits for the peer's next word beyond a case's own bound.
constexpr double silence_margin_s = 30;

addrinfo* numeric(const std::string& host, std::uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* found = nullptr;
  const auto service = std::to_string(port);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) throw std::runtime_error(fmt::format("control address '{}': {}", host, gai_strerror(rc)));
  return found;
}

struct AddressList {
  addrinfo* list;
  explicit AddressList(addrinfo* found) : list(found) {}
  ~AddressList() {
    if (list != nullptr) freeaddrinfo(list);
  }
  AddressList(const AddressList&) = delete;
  AddressList& operator=(const AddressList&) = delete;
};

// Waits until `fd` has `events`; false at the deadline; throws RunStopped on Ctrl-C.
bool await_fd(int fd, short events, Clock::time_point deadline, int stop_fd) {
  const auto waited = await_events(fd, events, stop_fd, deadline);
  if (waited == SocketWait::stopped) throw RunStopped(StopReason::interrupted, "stopped by a signal");
  return waited == SocketWait::ready;
}

std::string peer_name(const sockaddr_storage& address) {
  std::array<char, NI_MAXHOST> host{};
  std::array<char, NI_MAXSERV> service{};
  getnameinfo(reinterpret_cast<const sockaddr*>(&address), sizeof address, host.data(), host.size(), service.data(),
              service.size(), NI_NUMERICHOST | NI_NUMERICSERV);
  return fmt::format("{}:{}", host.data(), service.data());
}

const nlohmann::json& member(const nlohmann::json& object, const char* key) {
  if (!object.is_object() || !object.contains(key)) throw ProtocolError(fmt::format("'{}' is missing", key));
  return object.at(key);
}

template <typename T>
T typed(const nlohmann::json& object, const char* key) {
  const auto& value = member(object, key);
  try {
    return value.get<T>();
  } catch (const nlohmann::json::exception&) {
    throw ProtocolError(fmt::format("'{}' has the wrong type", key));
  }
}

std::vector<std::string> names_in(const nlohmann::json& object, const char* key) {
  auto names = typed<std::vector<std::string>>(object, key);
  if (names.size() > 64) throw ProtocolError(fmt::format("'{}' has {} entries", key, names.size()));
  return names;
}

}  // namespace

// The key handshakes of the peers that came, each on a thread of its own with its own
// deadline, so that a silent or slow one holds a seat, not the control port: the first that
// passes is the peer served, and the others are ended. Seats: handshake_seats at once,
// handshake_seats_per_peer from one address; a peer over them is closed unread.
class ControlChannel::PendingHandshakes {
 public:
  PendingHandshakes(int stop_fd, const SharedKey* key)
      : stop_fd_(stop_fd),
        key_(key),
        wake_(FileDescriptor::checked(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), "eventfd")),
        seats_(GateLimits{.allow = {}, .max_clients = handshake_seats, .max_per_peer = handshake_seats_per_peer}) {}
  PendingHandshakes(const PendingHandshakes&) = delete;
  PendingHandshakes& operator=(const PendingHandshakes&) = delete;
  ~PendingHandshakes() { end_all(); }

  int wake_fd() const { return wake_.get(); }

  // Everything waiting on `listener`, up to a batch, so that a flood is closed as fast as it
  // comes; a peer `gate` refuses, or one over the seats, is closed before a byte is read.
  void accept_waiting(int listener, int stop_fd, PeerGate* gate) {
    for (int taken = 0; taken < 64; ++taken) {
      auto accepted = tcp::accept_waiting(listener);
      if (!accepted) return;
      const auto& peer = accepted->peer;
      const auto* from = reinterpret_cast<const sockaddr*>(&peer);
      ControlChannel channel(accepted->socket.release(), stop_fd, peer_name(peer), IpAddress::of(from));
      if (gate != nullptr && !gate->admit(from, Clock::now()).admitted()) continue;
      start(std::move(channel), from);
    }
  }

  void start(ControlChannel channel, const sockaddr* from) {
    auto seat = seats_.admit(from, Clock::now());
    if (!seat.admitted()) return;  // logged by seats_, at its rate
    auto held = std::make_unique<Pending>(std::move(channel), std::move(seat.slot));
    Pending& pending = *held;
    pending.thread = std::thread([this, &pending] {
      try {
        // Its own bound, not the accept's: a peer that came just before the accept deadline still gets its time.
        pending.keys = handshake::serve_handshake(pending.channel.fd_, handshake::Service::smoke, key_,
                                                  Clock::now() + handshake_timeout, stop_fd_, &pending.answered);
      } catch (const std::exception& why) {
        pending.refusal = why.what();
      }
      pending.done = true;
      // Never full: a counter that overflows only past 2^64 - 2 wake-ups.
      const std::uint64_t one = 1;
      [[maybe_unused]] const auto woke = write(wake_.get(), &one, sizeof one);
    });
    pending_.push_back(std::move(held));
  }

  // The first peer whose handshake passed, if one did; those refused are said through `refused`.
  std::optional<ControlChannel> take_finished(const std::function<void(const std::string&)>& refused) {
    std::uint64_t count = 0;
    [[maybe_unused]] const auto read_count = read(wake_.get(), &count, sizeof count);
    std::optional<ControlChannel> served;
    for (auto it = pending_.begin(); it != pending_.end();) {
      Pending& pending = **it;
      if (!pending.done) {
        ++it;
        continue;
      }
      pending.thread.join();
      if (pending.keys && !served) {
        pending.channel.seal_with(*pending.keys, "the peer");
        served.emplace(std::move(pending.channel));
      } else if (!pending.keys && refused) {
        refused(fmt::format("refused {}: handshake: {}", pending.channel.peer(), pending.refusal));
      }
      it = pending_.erase(it);
    }
    if (served) end_all(refused);
    return served;
  }

 private:
  struct Pending {
    Pending(ControlChannel taken, PeerGate::Slot held_seat) : channel(std::move(taken)), seat(std::move(held_seat)) {}
    ControlChannel channel;
    PeerGate::Slot seat;
    std::thread thread;
    std::atomic<bool> done{false};
    std::atomic<bool> answered{false};
    std::optional<sealed::DirectionKeys> keys;
    std::string refusal;
  };

  // Each handshake still under way is cut short (its socket shut down) and its thread joined.
  // Once a peer is served, `refused` says those whose peer had answered: they were judged (a
  // wrong key is told to the peer before its thread says it is done); one still waiting for
  // its peer's answer is ended unjudged.
  void end_all(const std::function<void(const std::string&)>& refused = {}) {
    for (const auto& pending : pending_) shutdown(pending->channel.fd_, SHUT_RDWR);
    for (const auto& pending : pending_) {
      pending->thread.join();
      if (!refused || !pending->answered) continue;
      refused(pending->keys ? fmt::format("refused {}: another peer was served first", pending->channel.peer())
                            : fmt::format("refused {}: handshake: {}", pending->channel.peer(), pending->refusal));
    }
    pending_.clear();
  }

  int stop_fd_;
  const SharedKey* key_;
  FileDescriptor wake_;
  PeerGate seats_;
  std::vector<std::unique_ptr<Pending>> pending_;
};

ControlChannel ControlChannel::connect_to(const std::string& host, std::uint16_t port, Clock::time_point deadline,
                                          int stop_fd, const SharedKey* key, const std::string& source) {
  const AddressList addresses(numeric(host, port, false));
  const auto* address = addresses.list;
  const AddressList from(source.empty() ? nullptr : numeric(source, 0, false));
  int error = 0;
  // The serving side may not listen yet: try again until the deadline.
  while (Clock::now() < deadline) {
    try {
      auto socket = tcp::connect_to(
          address->ai_addr, address->ai_addrlen, std::min(deadline, Clock::now() + std::chrono::seconds(5)), stop_fd,
          from.list != nullptr ? from.list->ai_addr : nullptr, from.list != nullptr ? from.list->ai_addrlen : 0);
      ControlChannel channel(socket.release(), stop_fd, fmt::format("{}:{}", host, port));
      channel.seal_with(handshake::join_handshake(channel.fd_, handshake::Service::smoke, key,
                                                  Clock::now() + handshake_timeout, stop_fd),
                        "the serving side");
      return channel;
    } catch (const std::system_error& failed) {
      // Where we were told to connect from cannot be bound: no retry mends that.
      if (std::string_view(failed.what()).starts_with("bind")) {
        throw std::runtime_error(
            fmt::format("cannot connect from {} to rdma_smoke --serve: {}", source, failed.code().message()));
      }
      error = failed.code().value();
    }
    if (await_fd(stop_fd, POLLIN, Clock::now() + std::chrono::milliseconds(500), -1)) {
      throw RunStopped(StopReason::interrupted, "stopped by a signal");
    }
  }
  throw std::runtime_error(fmt::format("no rdma_smoke --serve at {}:{} ({}); start it there first", host, port,
                                       std::strerror(error != 0 ? error : ETIMEDOUT)));
}

ControlChannel ControlChannel::accept_one(const std::string& bind, std::uint16_t port, Clock::time_point deadline,
                                          int stop_fd, const std::function<void(const std::string&)>& listening,
                                          const SharedKey* key, const std::function<void(const std::string&)>& refused,
                                          PeerGate* gate) {
  const AddressList addresses(numeric(bind.empty() ? "::" : bind, port, true));
  const auto* address = addresses.list;
  auto listener =
      tcp::listen_on(address->ai_addr, address->ai_addrlen, handshake_backlog, fmt::format("control port {}", port));
  listening(fmt::format("control port {} on {}", port, bind.empty() ? "every address" : bind));
  PendingHandshakes pending(stop_fd, key);
  for (;;) {
    try {
      if (await_readable({listener.get(), pending.wake_fd()}, stop_fd, deadline, "a peer") == 1) {
        if (auto channel = pending.take_finished(refused)) return std::move(*channel);
        continue;
      }
    } catch (const RunStopped& stopped) {
      if (stopped.reason() == StopReason::timed_out) {
        throw RunStopped(StopReason::timed_out, "no peer came within the accept timeout");
      }
      throw;
    }
    pending.accept_waiting(listener.get(), stop_fd, gate);
  }
}

ControlChannel::ControlChannel(ControlChannel&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      stop_fd_(other.stop_fd_),
      peer_(std::move(other.peer_)),
      peer_address_(other.peer_address_),
      writer_(other.writer_),
      reader_(std::move(other.reader_)),
      buffered_(std::move(other.buffered_)) {}

ControlChannel::~ControlChannel() {
  if (fd_ >= 0) close(fd_);
}

void ControlChannel::seal_with(const sealed::DirectionKeys& keys, const std::string& peer_role) {
  writer_ = sealed::FrameWriter(keys.sending);
  reader_ = sealed::FrameReader(keys.receiving, max_control_bytes, peer_role);
}

void ControlChannel::send(const nlohmann::json& message) {
  const auto frame = writer_.seal(message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  if (!tcp::send_bytes(fd_, frame, Clock::now() + std::chrono::seconds(30), stop_fd_)) {
    throw ProtocolError("the peer takes no more data");
  }
}

nlohmann::json ControlChannel::receive(Clock::time_point deadline) {
  const auto payload = sealed::receive_frame(fd_, reader_, buffered_, deadline, stop_fd_);
  if (!payload) throw RunStopped(StopReason::timed_out, "the peer went silent");
  auto message = parse_untrusted_json(*payload, max_control_depth, "the peer's message");
  if (!message.is_object()) throw ProtocolError("the peer sent something that is not a JSON object");
  return message;
}

nlohmann::json plan_request(const PeerPlan& plan) {
  const auto& o = plan.forward;
  return {{"first_port", o.first_port},
          {"quick", o.quick},
          {"timeout_s", o.timeout_s},
          {"case_seconds", o.case_seconds},
          {"tools", o.tools},
          {"skip", o.skip},
          {"peer_address", o.local_address},
          {"forward", plan.run_forward},
          {"reverse", plan.run_reverse}};
}

PeerPlan plan_from_request(const nlohmann::json& request, const std::string& address,
                           const std::optional<IpAddress>& control_peer) {
  PeerPlan plan;
  auto& o = plan.forward;
  o.address = address;
  o.first_port = typed<std::uint16_t>(request, "first_port");
  o.quick = typed<bool>(request, "quick");
  o.timeout_s = typed<double>(request, "timeout_s");
  o.case_seconds = typed<double>(request, "case_seconds");
  if (!(o.timeout_s > 0 && o.timeout_s <= 3600 && o.case_seconds >= 1 && o.case_seconds <= 3600)) {
    throw ProtocolError("the timeouts are out of range");
  }
  if (o.first_port > 65535 - 2 * ports_per_plan) throw ProtocolError("the first port is out of range");
  o.tools = names_in(request, "tools");
  o.skip = names_in(request, "skip");
  plan.run_forward = typed<bool>(request, "forward");
  plan.run_reverse = typed<bool>(request, "reverse");
  if (!plan.run_forward && !plan.run_reverse) throw ProtocolError("neither direction is asked for");
  // The address this side's clients go to in the reverse cases: only ever a numeric one.
  o.local_address = typed<std::string>(request, "peer_address");
  if (!IpAddress::parse(o.local_address)) {
    throw ProtocolError("'peer_address' is not a numeric address");
  }
  if (control_peer && IpAddress::parse(o.local_address) != control_peer) {
    throw ProtocolError(
        fmt::format("'peer_address' {} is not the address the request came from ({}): clients here "
                    "go to the control peer only",
                    o.local_address, control_peer->to_string()));
  }
  return plan;
}

std::vector<SmokeCase> peer_cases(const PeerPlan& plan) {
  auto options = plan.forward;
  options.direction = Direction::forward;
  auto forward = plan_cases(options);
  auto reverse = plan_cases(reversed(options));
  std::vector<SmokeCase> cases;
  for (std::size_t i = 0; i < forward.size(); ++i) {
    if (plan.run_forward) cases.push_back(std::move(forward[i]));
    if (plan.run_reverse) cases.push_back(std::move(reverse[i]));
  }
  return cases;
}

nlohmann::json to_json(const ToolRun& run) {
  return described::write<SmokeJson>(run);
}

ToolRun tool_run_from_json(const nlohmann::json& item, const std::string& role) {
  auto run = described::read_document<SmokeJson, ToolRun>(item);
  if (run.role != role) throw ProtocolError(fmt::format("a {} run where a {} run belongs", run.role, role));
  return run;
}

std::vector<described::SchemaShape> tool_run_shapes() {
  return {{.schema = "rdma_smoke",
           .pointer = "/$defs/run",
           .shape = described::shape<SmokeJson, ToolRun>(),
           .extra_keys = {}}};
}

namespace {

// The serving side's cases, one request of the peer at a time.
class ServingSession {
 public:
  ServingSession(std::vector<SmokeCase> cases, const RunEnvironment& environment, ControlChannel& channel,
                 const std::function<void(const std::string&)>& say)
      : cases_(std::move(cases)), environment_(environment), channel_(channel), say_(say) {}

  // Answers one request; false once the peer said it is done.
  bool answer(const nlohmann::json& message) {
    if (message.contains("done")) return false;
    if (message.contains("start")) {
      start(typed<std::string>(message, "start"));
    } else if (message.contains("run_client") && !running_) {
      run_client_of(typed<std::string>(message, "run_client"));
    } else if (message.contains("finish") && running_) {
      finish(typed<bool>(message, "client_passed"));
    } else {
      channel_.send({{"error", "not a request this side knows now"}});
    }
    return true;
  }
  std::vector<CaseResult>& served() { return served_; }

 private:
  const SmokeCase* find(const std::string& name, Direction direction) const {
    const auto found = std::ranges::find_if(
        cases_, [&name, direction](const SmokeCase& c) { return c.name == name && c.direction == direction; });
    return found == cases_.end() ? nullptr : &*found;
  }

  // A forward case: its servers here, until the peer's client is done.
  void start(const std::string& name) {
    const auto* found = find(name, Direction::forward);
    if (found == nullptr || running_) {
      channel_.send({{"error", fmt::format("no case '{}' to start now", name)}});
      return;
    }
    current_ = found;
    started_ = Clock::now();
    running_ = std::make_unique<CaseServers>(*current_, environment_, case_deadline(*current_, started_));
    channel_.send({{"ready", running_->ready()}, {"reason", running_->start_failure()}});
    say_(fmt::format("{}: {}", name, running_->ready() ? "serving" : "not ready: " + running_->start_failure()));
  }

  void finish(bool client_passed) {
    auto result = result_of(*current_);
    result.runs = running_->finish(client_passed, case_deadline(*current_, started_));
    running_.reset();
    nlohmann::json runs = nlohmann::json::array();
    for (const auto& run : result.runs) runs.push_back(to_json(run));
    channel_.send({{"runs", runs}});
    keep(std::move(result), started_);
  }

  // A reverse case: its client here, against the servers the peer started.
  void run_client_of(const std::string& name) {
    const auto* found = find(name, Direction::reverse);
    if (found == nullptr) {
      channel_.send({{"error", fmt::format("no case '{}' to run a client of", name)}});
      return;
    }
    const auto started = Clock::now();
    auto result = result_of(*found);
    result.runs.push_back(run_client(*found, environment_, case_deadline(*found, started)));
    channel_.send({{"runs", nlohmann::json::array({to_json(result.runs.front())})}});
    keep(std::move(result), started);
  }

  // A case served, its runs sent: judged, timed, said and kept for this side's report.
  void keep(CaseResult result, Clock::time_point started) {
    judge(result, "");
    result.seconds = elapsed_ms(started) / 1000.0;
    say_(fmt::format("{}: {}", result.name, to_string(result.outcome)));
    served_.push_back(std::move(result));
  }

  std::vector<SmokeCase> cases_;
  const RunEnvironment& environment_;
  ControlChannel& channel_;
  const std::function<void(const std::string&)>& say_;
  std::unique_ptr<CaseServers> running_;
  const SmokeCase* current_ = nullptr;
  Clock::time_point started_;
  std::vector<CaseResult> served_;
};

// The serving side's plan, made from the peer's first message; refused with its reason.
std::vector<SmokeCase> agree_on_plan(ControlChannel& channel, const std::string& address) {
  const auto hello = channel.receive(Clock::now() + std::chrono::seconds(30));
  std::vector<SmokeCase> cases;
  try {
    cases = peer_cases(plan_from_request(member(hello, "plan"), address, channel.peer_address()));
  } catch (const std::exception& refused) {
    channel.send({{"error", refused.what()}});
    throw ProtocolError(std::string("the peer's plan: ") + refused.what());
  }
  nlohmann::json names = nlohmann::json::array();
  for (const auto& c : cases) names.push_back(c.name);
  channel.send({{"address", address}, {"cases", names}});
  return cases;
}

// A reply that is an error becomes ProtocolError saying it.
void check_reply(const nlohmann::json& reply) {
  if (reply.contains("error")) throw ProtocolError("the serving side: " + typed<std::string>(reply, "error"));
}

// The runs in a reply of the other side, each in `role`; throws ProtocolError.
std::vector<ToolRun> runs_in(const nlohmann::json& reply, const std::string& role) {
  check_reply(reply);
  const auto& runs = member(reply, "runs");
  if (!runs.is_array() || runs.size() > 8) throw ProtocolError("'runs' is not a list of at most 8 runs");
  std::vector<ToolRun> parsed;
  for (const auto& run : runs) parsed.push_back(tool_run_from_json(run, role));
  return parsed;
}

}  // namespace

void serve_smoke(const ServeOptions& options, const RunEnvironment& environment,
                 const std::function<void(const std::string&)>& say, ServeResult& served) {
  if (!options.key) say("warning: no --key-file: any peer allowed to connect is served without authentication");
  PeerGate gate(options.peers);
  if (!options.peers.allow.any()) say(answering_line(options.peers.allow));
  // The peers refused before a stop stay counted: after an accept timeout they are the news.
  auto channel = [&] {
    try {
      return ControlChannel::accept_one(
          options.bind, options.control_port,
          Clock::now() + std::chrono::milliseconds(static_cast<long long>(options.accept_seconds * 1000)),
          environment.stop_fd, say, options.key ? &*options.key : nullptr,
          [&served, &say](const std::string& line) {
            ++served.unauthenticated;
            say(line);
          },
          &gate);
    } catch (const RunStopped&) {
      served.refused = gate.refused();
      throw;
    }
  }();
  served.refused = gate.refused();
  say("peer " + channel.peer());
  std::vector<SmokeCase> cases;
  try {
    cases = agree_on_plan(channel, options.address);
  } catch (const ProtocolError& refused) {
    // A plan refused, or one that failed its MAC: the run's report says so, as for a peer lost.
    served.lost = refused.what();
    return;
  }
  const auto silence =
      std::chrono::milliseconds(static_cast<long long>((cases.front().seconds + silence_margin_s) * 1000));
  ServingSession session(std::move(cases), environment, channel, say);
  try {
    while (session.answer(channel.receive(Clock::now() + silence))) {
    }
    channel.send({{"bye", true}});
  } catch (const ProtocolError& gone) {
    served.lost = gone.what();
  } catch (const RunStopped& stopped) {
    if (stopped.reason() == StopReason::interrupted) throw;
    served.lost = stopped.what();
  }
  served.cases = std::move(session.served());
}

PeerSession::PeerSession(ControlChannel channel, const PeerPlan& plan) : channel_(std::move(channel)) {
  channel_.send({{"plan", plan_request(plan)}});
  const auto answer = channel_.receive(Clock::now() + std::chrono::seconds(30));
  if (answer.contains("error"))
    throw ProtocolError("the serving side refused the plan: " + typed<std::string>(answer, "error"));
  const auto theirs = names_in(answer, "cases");
  std::vector<std::string> ours;
  for (const auto& c : peer_cases(plan)) ours.push_back(c.name);
  if (theirs != ours) {
    throw ProtocolError(
        fmt::format("the serving side plans other cases ({}) than this side ({}): the same rdma_smoke "
                    "version on both?",
                    fmt::join(theirs, ", "), fmt::join(ours, ", ")));
  }
}

CaseResult PeerSession::run_case(const SmokeCase& smoke_case, const RunEnvironment& environment) {
  return smoke_case.direction == Direction::reverse ? run_reverse(smoke_case, environment)
                                                    : run_forward(smoke_case, environment);
}

CaseResult PeerSession::run_forward(const SmokeCase& smoke_case, const RunEnvironment& environment) {
  auto result = result_of(smoke_case);
  const auto started = Clock::now();
  const auto deadline = case_deadline(smoke_case, started);
  const auto reply_by = deadline + std::chrono::seconds(10);
  channel_.send({{"start", smoke_case.name}});
  const auto ready = channel_.receive(reply_by);
  check_reply(ready);
  const bool servers_ready = typed<bool>(ready, "ready");
  if (servers_ready) result.runs.push_back(run_client(smoke_case, environment, deadline));
  const bool client_passed = !result.runs.empty() && result.runs.front().outcome.exit_code == 0;
  channel_.send({{"finish", smoke_case.name}, {"client_passed", client_passed}});
  for (auto& run : runs_in(channel_.receive(reply_by + std::chrono::seconds(10)), "server")) {
    result.runs.push_back(std::move(run));
  }
  judge(result, typed<std::string>(ready, "reason"));
  result.seconds = elapsed_ms(started) / 1000.0;
  return result;
}

CaseResult PeerSession::run_reverse(const SmokeCase& smoke_case, const RunEnvironment& environment) {
  return run_with_servers_here(smoke_case, environment, [this, &smoke_case](Clock::time_point deadline) {
    channel_.send({{"run_client", smoke_case.name}});
    auto client = runs_in(channel_.receive(deadline + std::chrono::seconds(10)), "client");
    if (client.size() != 1) throw ProtocolError("the serving side sent no single client run");
    return std::move(client.front());
  });
}

void PeerSession::done() {
  channel_.send({{"done", true}});
  (void)channel_.receive(Clock::now() + std::chrono::seconds(10));
}

}  // namespace rdmakit::smoke
