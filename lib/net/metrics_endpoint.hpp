#pragma once
// A /metrics endpoint for Prometheus: an HTTP server (GNU libmicrohttpd) on the address it is
// told, serving the metrics it was last given, in the format the scraper asks for, and nothing
// else, to the scrapers its allow list names. Bounded before a byte is read: a scraper outside
// the allow list is closed at accept (counted; logged the first time from each address); at
// most 16 connections, 2 from one address, the rest closed at accept, never queued; 8 KiB of
// request line and headers; 2 s from a connection's start (or its previous request's end) to
// its answer, however slowly a peer drips; GET /metrics only, no body. One thread serves it,
// and it stops within 0.1 s.
//
// libmicrohttpd rather than cpp-httplib (Debian 12's 0.11): httplib reads the request line
// and every header before any check of ours, bounds time per read only and queues
// connections without bound; libmicrohttpd has an accept policy, per-address and total
// connection limits and a memory limit per connection, and runs in a thread of ours.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/net/openmetrics.hpp"
#include "lib/net/peer_gate.hpp"

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

  // What the daemon's C callbacks are given (metrics_endpoint.cpp).
  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace rdmakit
