#include "lib/net/metrics_endpoint.hpp"

#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"
#include "lib/base/file_descriptor.hpp"

namespace rdmakit {

namespace {

using Clock = std::chrono::steady_clock;

// What one scraper may make us hold, and for how long. A scrape's request is a few hundred
// bytes and one round trip; everything past these is refused or cut, never queued.
constexpr unsigned max_connections = 16;        // beyond: accepted and closed at once
constexpr unsigned max_per_address = 2;         // one scraper's share of them
constexpr std::size_t connection_bytes = 8192;  // request line and headers (431 beyond)
constexpr unsigned idle_seconds = 2;            // between two reads
// From a connection's start (or its previous request's end) to its request's answer: a
// peer that drips its headers is cut here, however steadily it drips.
constexpr auto request_deadline = std::chrono::seconds(2);
// The serving thread's longest sleep: how late a deadline or a stop is acted on.
constexpr int tick_ms = 100;
std::uint16_t port_of(std::string_view text, const std::string& whole) {
  unsigned value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value == 0 || value > 65535) {
    throw UsageError(fmt::format("--metrics {}: expected PORT, ADDRESS:PORT or [IPV6]:PORT", whole));
  }
  return static_cast<std::uint16_t>(value);
}

}  // namespace

ListenAddress parse_listen_address(const std::string& text) {
  if (text.starts_with('[')) {
    const auto close = text.find("]:");
    if (close == std::string::npos) port_of("", text);
    return {text.substr(1, close - 1), port_of(std::string_view(text).substr(close + 2), text)};
  }
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) return {"127.0.0.1", port_of(text, text)};
  if (text.find(':') != colon) port_of("", text);  // a bare IPv6 address needs its brackets
  return {text.substr(0, colon), port_of(std::string_view(text).substr(colon + 1), text)};
}

struct MetricsEndpoint::State {
  explicit State(AllowList allow) : gate(GateLimits{.allow = std::move(allow), .allow_flag = "--metrics-allow"}) {}

  // The accept policy: a scraper outside the allow list is closed before a byte is read,
  // counted, and logged as every listener's gate logs refusals (a line each, then at a rate).
  bool admit(const sockaddr* peer) { return gate.admit(peer, Clock::now()).admitted(); }

  // The answer to one request whose headers have arrived.
  MHD_Result answer(MHD_Connection* connection, const char* url, const char* method) {
    unsigned status = MHD_HTTP_OK;
    std::string text;
    std::string type = "text/plain; charset=utf-8";
    const char* length = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const bool has_body =
        (length != nullptr && std::strcmp(length, "0") != 0) ||
        MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING) != nullptr;
    if (std::strcmp(method, MHD_HTTP_METHOD_GET) != 0) {
      status = MHD_HTTP_METHOD_NOT_ALLOWED;
      text = "GET /metrics only\n";
    } else if (has_body) {
      status = MHD_HTTP_CONTENT_TOO_LARGE;
      text = "a scrape carries no body\n";
    } else if (std::strcmp(url, "/metrics") != 0) {
      status = MHD_HTTP_NOT_FOUND;
      text = "GET /metrics only\n";
    } else {
      const char* accept = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
      const auto format = openmetrics::negotiate(accept == nullptr ? "" : accept);
      {
        const std::lock_guard lock(mutex);
        text = format == openmetrics::Format::openmetrics ? openmetrics_text : prometheus_text;
      }
      type = openmetrics::content_type(format);
      ++scrapes;
    }
    MHD_Response* response = MHD_create_response_from_buffer(text.size(), text.data(), MHD_RESPMEM_MUST_COPY);
    if (response == nullptr) return MHD_NO;
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, type.c_str());
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET");
    // What follows a refused request is not read: the connection ends with the answer.
    if (status != MHD_HTTP_OK) MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
    const auto queued = MHD_queue_response(connection, status, response);
    MHD_destroy_response(response);
    return queued;
  }

  // Connections past their request deadline are shut down; the daemon sees the end at its
  // next run and closes them. Only the serving thread calls this, as it alone runs the daemon.
  void cut_late_requests() {
    const auto now = Clock::now();
    for (auto& [connection, started] : request_started) {
      if (now - started < request_deadline) continue;
      if (const auto* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD)) {
        shutdown(info->connect_fd, SHUT_RDWR);
      }
      started = Clock::time_point::max() - request_deadline;  // once
    }
  }

  void serve() {
    const auto* epoll = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_EPOLL_FD);
    std::array<pollfd, 2> fds{pollfd{.fd = epoll->epoll_fd, .events = POLLIN, .revents = 0},
                              pollfd{.fd = stop.get(), .events = POLLIN, .revents = 0}};
    for (;;) {
      MHD_UNSIGNED_LONG_LONG due_ms = tick_ms;
      int wait_ms = tick_ms;
      if (MHD_get_timeout(daemon, &due_ms) == MHD_YES)
        wait_ms = static_cast<int>(std::min<MHD_UNSIGNED_LONG_LONG>(due_ms, tick_ms));
      if (poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR) {
        spdlog::error("/metrics: poll failed: {}", std::strerror(errno));
        return;
      }
      if (fds[1].revents != 0) return;
      MHD_run(daemon);
      cut_late_requests();
    }
  }

  PeerGate gate;  // its allow list only: libmicrohttpd caps the connections
  MHD_Daemon* daemon = nullptr;
  FileDescriptor stop{eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  // Serving thread only: when each open connection's current request began.
  std::map<MHD_Connection*, Clock::time_point> request_started;
  std::mutex mutex;  // the texts, between publish() and the serving thread
  std::string openmetrics_text = openmetrics::render({}, openmetrics::Format::openmetrics);
  std::string prometheus_text;
  std::atomic<std::uint64_t> scrapes{0};
  std::thread thread;
};

namespace {

using State = MetricsEndpoint::State;

MHD_Result accept_policy(void* state, const sockaddr* peer, socklen_t /*length*/) {
  return static_cast<State*>(state)->admit(peer) ? MHD_YES : MHD_NO;
}

MHD_Result access_handler(void* state, MHD_Connection* connection, const char* url, const char* method,
                          const char* /*version*/, const char* /*upload_data*/, size_t* upload_size, void** request) {
  if (*request == nullptr) {  // the headers are in: answer now
    *request = state;
    return static_cast<State*>(state)->answer(connection, url, method);
  }
  *upload_size = 0;  // a body after a refusal: dropped
  return MHD_YES;
}

void connection_notice(void* state, MHD_Connection* connection, void** /*socket_context*/,
                       MHD_ConnectionNotificationCode code) {
  auto& started = static_cast<State*>(state)->request_started;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) started[connection] = Clock::now();
  if (code == MHD_CONNECTION_NOTIFY_CLOSED) started.erase(connection);
}

// A request answered: the connection's next one (keep-alive) starts its own deadline.
void request_completed(void* state, MHD_Connection* connection, void** /*request*/,
                       MHD_RequestTerminationCode /*code*/) {
  auto& started = static_cast<State*>(state)->request_started;
  if (const auto found = started.find(connection); found != started.end()) found->second = Clock::now();
}

void daemon_log(void* /*state*/, const char* format, va_list arguments) {
  std::array<char, 256> line{};
  std::vsnprintf(line.data(), line.size(), format, arguments);
  spdlog::debug("/metrics: {}", std::string_view(line.data()).substr(0, std::strcspn(line.data(), "\n")));
}

// The listening socket, bound and listening before the daemon starts, so that a port taken
// or an address not ours is a usage error here.
FileDescriptor listening_socket(const ListenAddress& where) {
  const auto refuse = [&where](const std::string& why) {
    return UsageError(fmt::format("--metrics {}:{}: cannot listen there ({})", where.host, where.port, why));
  };
  addrinfo hints{};
  hints.ai_flags = AI_PASSIVE;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(where.host.c_str(), std::to_string(where.port).c_str(), &hints, &found); rc != 0) {
    throw refuse(gai_strerror(rc));
  }
  const std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, freeaddrinfo);
  FileDescriptor socket_fd(::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol));
  if (socket_fd.get() < 0) throw refuse(std::strerror(errno));
  // SO_REUSEADDR alone: with SO_REUSEPORT a second process would bind the same port and the
  // kernel would split the scrapes between the two.
  const int yes = 1;
  setsockopt(socket_fd.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  if (::bind(socket_fd.get(), found->ai_addr, found->ai_addrlen) != 0 ||
      ::listen(socket_fd.get(), static_cast<int>(max_connections)) != 0) {
    throw refuse(errno == EADDRINUSE ? "the port is taken" : std::strerror(errno));
  }
  return socket_fd;
}

}  // namespace

MetricsEndpoint::MetricsEndpoint(const ListenAddress& where, AllowList allow)
    : state_(std::make_unique<State>(std::move(allow))) {
  auto socket_fd = listening_socket(where);
  if (state_->stop.get() < 0) throw RdmaError("eventfd", "/metrics", errno);
  State* state = state_.get();
  // No thread of the daemon's own: the one below runs it, and between runs cuts what is late.
  state->daemon = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_USE_SUPPRESS_DATE_NO_CLOCK, 0, accept_policy,
                                   state, access_handler, state, MHD_OPTION_LISTEN_SOCKET, socket_fd.get(),
                                   MHD_OPTION_CONNECTION_LIMIT, max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                                   max_per_address, MHD_OPTION_CONNECTION_MEMORY_LIMIT, connection_bytes,
                                   MHD_OPTION_CONNECTION_TIMEOUT, idle_seconds, MHD_OPTION_NOTIFY_CONNECTION,
                                   connection_notice, state, MHD_OPTION_NOTIFY_COMPLETED, request_completed, state,
                                   MHD_OPTION_EXTERNAL_LOGGER, daemon_log, state, MHD_OPTION_END);
  if (state->daemon == nullptr) throw RdmaError("MHD_start_daemon", "/metrics", EINVAL);
  socket_fd.release();  // the daemon closes it
  state->thread = std::thread([state] { state->serve(); });
  spdlog::info("serving /metrics on {}:{} to {}", where.host, where.port, state_->gate.limits().allow.to_string());
}

MetricsEndpoint::~MetricsEndpoint() {
  const std::uint64_t one = 1;
  if (write(state_->stop.get(), &one, sizeof(one)) < 0) spdlog::debug("/metrics: eventfd write failed");
  if (state_->thread.joinable()) state_->thread.join();
  // Open connections are closed, not waited for.
  MHD_stop_daemon(state_->daemon);
}

void MetricsEndpoint::publish(const std::vector<openmetrics::Family>& families) {
  // Rendered here, not per scrape: a name the formats refuse throws in the caller's thread.
  auto openmetrics_text = openmetrics::render(families, openmetrics::Format::openmetrics);
  auto prometheus_text = openmetrics::render(families, openmetrics::Format::prometheus_text);
  const std::lock_guard lock(state_->mutex);
  state_->openmetrics_text = std::move(openmetrics_text);
  state_->prometheus_text = std::move(prometheus_text);
}

std::uint64_t MetricsEndpoint::scrapes() const {
  return state_->scrapes.load();
}

std::uint64_t MetricsEndpoint::refused() const {
  return state_->gate.refused().not_allowed;
}

}  // namespace rdmakit
