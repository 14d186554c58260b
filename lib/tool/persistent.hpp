#pragma once
// Persistent servers (rping -P, rdma_server -P): the listening thread only accepts, and each
// connection is served on a thread of its own that ends in a record, never in an exception,
// so one misbehaving client cannot take the server down.

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/described_json.hpp"
#include "lib/base/error.hpp"
#include "lib/base/report.hpp"

namespace rdmakit {

struct ServedConnection {
  std::string peer;
  std::uint64_t iterations = 0;
  std::uint64_t bytes = 0;
  Outcome outcome = Outcome::completed;
  std::string error;
};

nlohmann::json to_json(const ServedConnection& connection);

// How many connections a persistent server's report lists one by one: the latest. Those that
// ended before are folded into totals ("earlier_connections"), so that a server up for months
// holds and writes a report of bounded size.
inline constexpr std::size_t listed_connections = 1000;

// The connections folded out of the list: how many, what they carried, how many failed.
struct EarlierConnections {
  std::uint64_t count = 0;
  std::uint64_t iterations = 0;
  std::uint64_t bytes = 0;
  std::uint64_t failed = 0;  // outcome other than completed

  void fold(const ServedConnection& connection);
};
nlohmann::json to_json(const EarlierConnections& earlier);
// The records' shapes and their schema definitions (tests/unit/described_json_test.cpp).
std::vector<described::SchemaShape> persistent_json_shapes();

// The latest `kept` entries; add() hands back the one it pushed out, for the caller to fold.
template <typename Entry>
class LatestEntries {
 public:
  explicit LatestEntries(std::size_t kept = listed_connections) : kept_(kept) {}
  std::optional<Entry> add(Entry entry) {
    entries_.push_back(std::move(entry));
    if (entries_.size() <= kept_) return std::nullopt;
    auto oldest = std::move(entries_.front());
    entries_.pop_front();
    return oldest;
  }
  const std::deque<Entry>& entries() const { return entries_; }

 private:
  std::size_t kept_;
  std::deque<Entry> entries_;
};

// A persistent server's connections: the latest, one by one in the order they ended, and
// the totals of those before.
class ConnectionHistory {
 public:
  explicit ConnectionHistory(std::size_t kept = listed_connections) : latest_(kept) {}
  void add(ServedConnection connection) {
    if (auto oldest = latest_.add(std::move(connection))) earlier_.fold(*oldest);
  }
  const std::deque<ServedConnection>& latest() const { return latest_.entries(); }
  const EarlierConnections& earlier() const { return earlier_; }

 private:
  LatestEntries<ServedConnection> latest_;
  EarlierConnections earlier_;
};

// A persistent server's connections in its report ("connections", and "earlier_connections"
// once some were folded).
struct ServedConnections final : ReportSection {
  ConnectionHistory history;

  explicit ServedConnections(ConnectionHistory served) : history(std::move(served)) {}
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

// A client's connection request, taken off a listener and not yet served.
template <typename Connection>
struct ConnectionRequest {
  std::string peer;
  std::unique_ptr<Connection> connection;
};

// The persistent server of rping -P and rdma_server -P over serve_persistently:
// `next_request()` returns the next client's ConnectionRequest (throwing RunStopped as
// `accept` does above) and `serve_one(connection, connection_report, served)` serves it on
// its own thread. Each connection's steps go to a report of its own, since the server
// reports only totals.
template <typename NextRequest, typename ServeOne>
void serve_each_client(NextRequest next_request, ServeOne serve_one, Report& report) {
  serve_persistently(
      [&]() -> AcceptedConnection {
        auto request = next_request();
        std::shared_ptr connection(std::move(request.connection));
        // serve_persistently joins every connection before it returns, so `serve_one` outlives them.
        return {std::move(request.peer), [connection, &serve_one](ServedConnection& served) {
                  Report connection_report;
                  serve_one(*connection, connection_report, served);
                }};
      },
      report);
}

// How a persistent server ends on RunStopped: interrupted is the report's outcome,
// timed_out (no client within the idle deadline) a normal end.
void stop_serving(const RunStopped& stopped, Report& report);

}  // namespace rdmakit
