#pragma once
// Persistent servers (rping -P, rdma_server -P): the listening thread only accepts, and each
// connection is served on a thread of its own that ends in a record, never in an exception,
// so one misbehaving client cannot take the server down.

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/core/report.hpp"

namespace rdmakit {

struct ServedConnection {
  std::string peer;
  std::uint64_t iterations = 0;
  std::uint64_t bytes = 0;
  Outcome outcome = Outcome::completed;
  std::string error;
};

nlohmann::json to_json(const ServedConnection& connection);

// A persistent server's connections in its report ("connections"), in the order they ended.
struct ServedConnections final : ReportSection {
  std::vector<ServedConnection> connections;

  explicit ServedConnections(std::vector<ServedConnection> served) : connections(std::move(served)) {}
  void add_to(nlohmann::json& document) const override;
};

// A connection request taken off the listener: who sent it and the work that serves it.
// `serve` fills in the counts as it goes and may throw; what it throws becomes the
// record's outcome and error.
struct AcceptedConnection {
  std::string peer;
  std::function<void(ServedConnection&)> serve;
};

// A server of one connection: runs `serve` and copies its counts into `report`, also when
// it throws (which it then rethrows, for the tool to report).
void serve_counted(const std::function<void(ServedConnection&)>& serve, Report& report);

// Runs `connection.serve`, catching what it throws into the returned record.
ServedConnection serve_recorded(const AcceptedConnection& connection);

// Calls `accept` for one connection after another and serves each on its own thread, until
// `accept` throws RunStopped: interrupted (the stop signal) becomes the report's outcome,
// timed_out (no client within the idle deadline `accept` waits under) is a normal end. Then
// joins every connection and totals their records into `report` (iterations, bytes and
// a ServedConnections section). An accept that fails otherwise is
// recorded and the server goes on; only several failures in a row, where the listener
// itself is broken, end the run with that error.
void serve_persistently(const std::function<AcceptedConnection()>& accept, Report& report);

}  // namespace rdmakit
