#pragma once
// A /metrics endpoint for Prometheus: an HTTP server (cpp-httplib) on the address it is told,
// serving the metrics it was last given, in the format the scraper asks for, and nothing else, to the scrapers its
// allow list names (others get 403, the first time from each address a log line, and are counted). Bounded: GET only,
// one path, a small request, short read and write timeouts, a fixed pool of threads.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/core/openmetrics.hpp"
#include "lib/core/peer_gate.hpp"

namespace rdmakit {

// "PORT", "ADDRESS:PORT" or "[IPV6]:PORT"; the address defaults to 127.0.0.1. Throws
// UsageError for anything else.
struct ListenAddress {
  std::string host;
  std::uint16_t port = 0;
};
ListenAddress parse_listen_address(const std::string& text);

class MetricsEndpoint {
 public:
  // Binds now (a port taken or an address not ours throws UsageError: exit 2 before any
  // probing) and serves from a thread of its own.
  MetricsEndpoint(const ListenAddress& where, AllowList allow);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // What GET /metrics answers from now on: OpenMetrics to a scraper that asks for it in its
  // Accept header (Prometheus does), the Prometheus text format to any other.
  void publish(const std::vector<openmetrics::Family>& families);
  std::uint64_t scrapes() const;
  std::uint64_t refused() const;  // requests from outside the allow list

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace rdmakit
