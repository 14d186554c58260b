#include "lib/smoke/remote.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "lib/core/error.hpp"
#include "lib/core/file_descriptor.hpp"

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
  ~AddressList() { freeaddrinfo(list); }
  AddressList(const AddressList&) = delete;
  AddressList& operator=(const AddressList&) = delete;
};

// Waits until `fd` has `events`; false at the deadline; throws RunStopped on Ctrl-C.
bool await_fd(int fd, short events, Clock::time_point deadline, int stop_fd) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    std::array<pollfd, 2> fds{pollfd{.fd = fd, .events = events, .revents = 0},
                              pollfd{.fd = stop_fd, .events = POLLIN, .revents = 0}};
    const int ready = poll(fds.data(), stop_fd >= 0 ? 2 : 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) throw std::system_error(errno, std::generic_category(), "poll");
    if (stop_fd >= 0 && (fds[1].revents & POLLIN) != 0)
      throw RunStopped(StopReason::interrupted, "stopped by a signal");
    if (ready > 0) return true;
  }
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

ControlChannel ControlChannel::connect_to(const std::string& host, std::uint16_t port, Clock::time_point deadline,
                                          int stop_fd) {
  const AddressList addresses(numeric(host, port, false));
  const auto* address = addresses.list;
  int error = 0;
  // The serving side may not listen yet: try again until the deadline.
  while (Clock::now() < deadline) {
    FileDescriptor socket(::socket(address->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (socket.get() < 0) throw std::system_error(errno, std::generic_category(), "socket");
    if (::connect(socket.get(), address->ai_addr, address->ai_addrlen) != 0 && errno != EINPROGRESS) {
      error = errno;
    } else if (await_fd(socket.get(), POLLOUT, std::min(deadline, Clock::now() + std::chrono::seconds(5)), stop_fd)) {
      socklen_t length = sizeof error;
      getsockopt(socket.get(), SOL_SOCKET, SO_ERROR, &error, &length);
      if (error == 0) return ControlChannel(dup(socket.get()), stop_fd, fmt::format("{}:{}", host, port));
    } else {
      error = ETIMEDOUT;
    }
    if (await_fd(stop_fd, POLLIN, Clock::now() + std::chrono::milliseconds(500), -1)) {
      throw RunStopped(StopReason::interrupted, "stopped by a signal");
    }
  }
  throw std::runtime_error(fmt::format("no rdma_smoke --serve at {}:{} ({}); start it there first", host, port,
                                       std::strerror(error != 0 ? error : ETIMEDOUT)));
}

ControlChannel ControlChannel::accept_one(const std::string& bind, std::uint16_t port, Clock::time_point deadline,
                                          int stop_fd, const std::function<void(const std::string&)>& listening) {
  const AddressList addresses(numeric(bind.empty() ? "::" : bind, port, true));
  const auto* address = addresses.list;
  FileDescriptor listener(::socket(address->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (listener.get() < 0) throw std::system_error(errno, std::generic_category(), "socket");
  const int on = 1;
  setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (::bind(listener.get(), address->ai_addr, address->ai_addrlen) != 0) {
    throw std::system_error(errno, std::generic_category(), fmt::format("bind to control port {}", port));
  }
  if (::listen(listener.get(), 1) != 0) throw std::system_error(errno, std::generic_category(), "listen");
  listening(fmt::format("control port {} on {}", port, bind.empty() ? "every address" : bind));
  if (!await_fd(listener.get(), POLLIN, deadline, stop_fd)) {
    throw RunStopped(StopReason::timed_out, "no peer came within the accept timeout");
  }
  sockaddr_storage peer{};
  socklen_t length = sizeof peer;
  const int fd = accept4(listener.get(), reinterpret_cast<sockaddr*>(&peer), &length, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "accept");
  return ControlChannel(fd, stop_fd, peer_name(peer));
}

ControlChannel::ControlChannel(ControlChannel&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      stop_fd_(other.stop_fd_),
      peer_(std::move(other.peer_)),
      buffered_(std::move(other.buffered_)) {}

ControlChannel::~ControlChannel() {
  if (fd_ >= 0) close(fd_);
}

void ControlChannel::send(const nlohmann::json& message) {
  const auto line = message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::size_t sent = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (sent < line.size()) {
    const auto n = ::send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!await_fd(fd_, POLLOUT, deadline, stop_fd_)) throw ProtocolError("the peer takes no more data");
    } else {
      throw ProtocolError(fmt::format("the peer is gone ({})", std::strerror(errno)));
    }
  }
}

nlohmann::json ControlChannel::receive(Clock::time_point deadline) {
  for (;;) {
    if (const auto end = buffered_.find('\n'); end != std::string::npos) {
      auto message = nlohmann::json::parse(buffered_.substr(0, end), nullptr, false);
      buffered_.erase(0, end + 1);
      if (!message.is_object()) throw ProtocolError("the peer sent something that is not a JSON object");
      return message;
    }
    if (buffered_.size() > max_control_bytes) throw ProtocolError("the peer sent a message over the size limit");
    if (!await_fd(fd_, POLLIN, deadline, stop_fd_)) throw RunStopped(StopReason::timed_out, "the peer went silent");
    std::array<char, 65536> chunk{};
    const auto n = ::recv(fd_, chunk.data(), chunk.size(), 0);
    if (n == 0) throw ProtocolError("the peer closed the control connection");
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n < 0) throw ProtocolError(fmt::format("the control connection failed ({})", std::strerror(errno)));
    buffered_.append(chunk.data(), static_cast<std::size_t>(n));
  }
}

nlohmann::json plan_request(const PlanOptions& o) {
  return {{"first_port", o.first_port},     {"quick", o.quick}, {"timeout_s", o.timeout_s},
          {"case_seconds", o.case_seconds}, {"tools", o.tools}, {"skip", o.skip}};
}

PlanOptions plan_from_request(const nlohmann::json& request, const std::string& address) {
  PlanOptions o;
  o.address = address;
  o.first_port = typed<std::uint16_t>(request, "first_port");
  o.quick = typed<bool>(request, "quick");
  o.timeout_s = typed<double>(request, "timeout_s");
  o.case_seconds = typed<double>(request, "case_seconds");
  if (!(o.timeout_s > 0 && o.timeout_s <= 3600 && o.case_seconds >= 1 && o.case_seconds <= 3600)) {
    throw ProtocolError("the timeouts are out of range");
  }
  o.tools = names_in(request, "tools");
  o.skip = names_in(request, "skip");
  return o;
}

nlohmann::json to_json(const ToolRun& run) {
  const auto& o = run.outcome;
  nlohmann::json item = {{"role", run.role},     {"command", run.command},   {"exit_code", o.exit_code},
                         {"signal", o.signal},   {"timed_out", o.timed_out}, {"seconds", o.seconds},
                         {"report", run.report}, {"stderr", o.err}};
  if (!o.start_error.empty()) item["start_error"] = o.start_error;
  return item;
}

ToolRun tool_run_from_json(const nlohmann::json& item) {
  ToolRun run;
  run.role = typed<std::string>(item, "role");
  if (run.role != "server") throw ProtocolError("a served run that is no server's");
  run.command = names_in(item, "command");
  run.outcome.exit_code = typed<int>(item, "exit_code");
  run.outcome.signal = typed<int>(item, "signal");
  run.outcome.timed_out = typed<bool>(item, "timed_out");
  run.outcome.seconds = typed<double>(item, "seconds");
  run.outcome.err = typed<std::string>(item, "stderr");
  if (item.contains("start_error")) run.outcome.start_error = typed<std::string>(item, "start_error");
  const auto& report = member(item, "report");
  if (!report.is_object() && !report.is_null()) throw ProtocolError("'report' is neither an object nor null");
  run.report = report;
  return run;
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
    } else if (message.contains("finish") && running_) {
      finish(typed<bool>(message, "client_passed"));
    } else {
      channel_.send({{"error", "not a request this side knows now"}});
    }
    return true;
  }
  std::vector<CaseResult>& served() { return served_; }

 private:
  void start(const std::string& name) {
    const auto found = std::ranges::find_if(cases_, [&name](const SmokeCase& c) { return c.name == name; });
    if (found == cases_.end() || running_) {
      channel_.send({{"error", fmt::format("no case '{}' to start now", name)}});
      return;
    }
    current_ = &*found;
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
    judge(result, "");
    result.seconds = elapsed_ms(started_) / 1000.0;
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
    cases = plan_cases(plan_from_request(member(hello, "plan"), address));
  } catch (const std::exception& refused) {
    channel.send({{"error", refused.what()}});
    throw ProtocolError(std::string("the peer's plan: ") + refused.what());
  }
  nlohmann::json names = nlohmann::json::array();
  for (const auto& c : cases) names.push_back(c.name);
  channel.send({{"address", address}, {"cases", names}});
  return cases;
}

}  // namespace

ServeResult serve_smoke(const ServeOptions& options, const RunEnvironment& environment,
                        const std::function<void(const std::string&)>& say) {
  auto channel = ControlChannel::accept_one(
      options.bind, options.control_port,
      Clock::now() + std::chrono::milliseconds(static_cast<long long>(options.accept_seconds * 1000)),
      environment.stop_fd, say);
  say("peer " + channel.peer());
  auto cases = agree_on_plan(channel, options.address);
  const auto silence =
      std::chrono::milliseconds(static_cast<long long>((cases.front().seconds + silence_margin_s) * 1000));
  ServingSession session(std::move(cases), environment, channel, say);
  ServeResult served;
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
  return served;
}

RemoteServers::RemoteServers(ControlChannel channel, const PlanOptions& plan) : channel_(std::move(channel)) {
  channel_.send({{"plan", plan_request(plan)}});
  const auto answer = channel_.receive(Clock::now() + std::chrono::seconds(30));
  if (answer.contains("error"))
    throw ProtocolError("the serving side refused the plan: " + typed<std::string>(answer, "error"));
  const auto theirs = names_in(answer, "cases");
  std::vector<std::string> ours;
  for (const auto& c : plan_cases(plan)) ours.push_back(c.name);
  if (theirs != ours) {
    throw ProtocolError(
        fmt::format("the serving side plans other cases ({}) than this side ({}): the same rdma_smoke "
                    "version on both?",
                    fmt::join(theirs, ", "), fmt::join(ours, ", ")));
  }
}

CaseResult RemoteServers::run_case(const SmokeCase& c, const RunEnvironment& environment) {
  auto result = result_of(c);
  const auto started = Clock::now();
  const auto deadline = case_deadline(c, started);
  const auto reply_by = deadline + std::chrono::seconds(10);
  channel_.send({{"start", c.name}});
  const auto ready = channel_.receive(reply_by);
  if (ready.contains("error")) throw ProtocolError("the serving side: " + typed<std::string>(ready, "error"));
  const bool servers_ready = typed<bool>(ready, "ready");
  if (servers_ready) result.runs.push_back(run_client(c, environment, deadline));
  const bool client_passed = !result.runs.empty() && result.runs.front().outcome.exit_code == 0;
  channel_.send({{"finish", c.name}, {"client_passed", client_passed}});
  const auto finished = channel_.receive(reply_by + std::chrono::seconds(10));
  const auto& runs = member(finished, "runs");
  if (!runs.is_array() || runs.size() > 8) throw ProtocolError("'runs' is not a list of at most 8 runs");
  for (const auto& run : runs) result.runs.push_back(tool_run_from_json(run));
  judge(result, typed<std::string>(ready, "reason"));
  result.seconds = elapsed_ms(started) / 1000.0;
  return result;
}

void RemoteServers::done() {
  channel_.send({{"done", true}});
  (void)channel_.receive(Clock::now() + std::chrono::seconds(10));
}

}  // namespace rdmakit::smoke
