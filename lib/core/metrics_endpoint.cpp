#include "lib/core/metrics_endpoint.hpp"

#include <sys/socket.h>

#include <atomic>
#include <charconv>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include "lib/core/error.hpp"

namespace rdmakit {

namespace {

constexpr std::size_t max_request_bytes = 4096;
// Refused addresses remembered so that each is logged once; a spray of sources stops the
// logging, not the counting.
constexpr std::size_t logged_refusals = 256;

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
  explicit State(AllowList allow_in) : allow(std::move(allow_in)) {}

  // True for a scraper the allow list names; a refusal is counted, and logged the first
  // time from each address.
  bool admit(const std::string& remote_address, int remote_port) {
    const auto address = IpAddress::parse(remote_address);
    if (address && allow.allows(*address)) return true;
    ++refused;
    const std::lock_guard lock(mutex);
    if (refused_logged.size() < logged_refusals && refused_logged.insert(remote_address).second) {
      spdlog::warn("refused a scrape of /metrics from {} port {}: not in --metrics-allow ({})", remote_address,
                   remote_port, allow.to_string());
    }
    return false;
  }

  const AllowList allow;
  httplib::Server server;
  std::mutex mutex;
  std::string openmetrics_text = openmetrics::render({}, openmetrics::Format::openmetrics);
  std::string prometheus_text;
  std::set<std::string> refused_logged;
  std::atomic<std::uint64_t> scrapes{0};
  std::atomic<std::uint64_t> refused{0};
  std::thread thread;
};

MetricsEndpoint::MetricsEndpoint(const ListenAddress& where, AllowList allow)
    : state_(std::make_unique<State>(std::move(allow))) {
  auto& server = state_->server;
  server.set_payload_max_length(max_request_bytes);
  server.set_read_timeout(5, 0);
  server.set_write_timeout(5, 0);
  server.set_keep_alive_max_count(10);
  // cpp-httplib's default sets SO_REUSEPORT too, with which a second process binds the same
  // port and the kernel splits the scrapes between the two: SO_REUSEADDR alone.
  server.set_socket_options([](int socket) {
    int yes = 1;
    setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // Two threads serve every scraper: a scrape is one copy of a few KiB.
  server.new_task_queue = [] { return new httplib::ThreadPool(2); };
  server.set_pre_routing_handler([state = state_.get()](const httplib::Request& request, httplib::Response& response) {
    if (state->admit(request.remote_addr, request.remote_port)) return httplib::Server::HandlerResponse::Unhandled;
    response.status = 403;
    return httplib::Server::HandlerResponse::Handled;
  });
  server.Get("/metrics", [state = state_.get()](const httplib::Request& request, httplib::Response& response) {
    const auto format = openmetrics::negotiate(request.get_header_value("Accept"));
    std::string text;
    {
      const std::lock_guard lock(state->mutex);
      text = format == openmetrics::Format::openmetrics ? state->openmetrics_text : state->prometheus_text;
    }
    ++state->scrapes;
    response.set_content(text, std::string(openmetrics::content_type(format)));
  });
  if (!server.bind_to_port(where.host, where.port)) {
    throw UsageError(
        fmt::format("--metrics {}:{}: cannot listen there (the port is taken, or the address is not "
                    "this host's)",
                    where.host, where.port));
  }
  state_->thread = std::thread([state = state_.get()] { state->server.listen_after_bind(); });
  spdlog::info("serving /metrics on {}:{} to {}", where.host, where.port, state_->allow.to_string());
}

MetricsEndpoint::~MetricsEndpoint() {
  state_->server.stop();
  if (state_->thread.joinable()) state_->thread.join();
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
  return state_->refused.load();
}

}  // namespace rdmakit
