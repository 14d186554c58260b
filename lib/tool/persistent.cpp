#include "lib/tool/persistent.hpp"

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"

namespace rdmakit {

namespace {

// A listener that fails this often without one success in between is not coming back.
constexpr int accept_failures_before_giving_up = 8;

}  // namespace

namespace {

using described::Describes;

// A persistent server's records; nothing reads them back but the schema check.
struct PersistentJson {
  static constexpr described::ReadLimits limits{};
  static constexpr auto missing_keys = described::MissingKeys::refused;

  static void members(Describes<ServedConnection> auto& connection, auto&& visit) {
    visit("peer", connection.peer);
    visit("iterations", connection.iterations);
    visit("bytes", connection.bytes);
    visit("outcome", connection.outcome);
    visit("error", connection.error);
  }
  static void members(Describes<EarlierConnections> auto& earlier, auto&& visit) {
    visit("count", earlier.count);
    visit("iterations", earlier.iterations);
    visit("bytes", earlier.bytes);
    visit("failed", earlier.failed);
  }

  static nlohmann::json write_leaf(Outcome outcome) { return to_string(outcome); }
  static void read_leaf(const nlohmann::json& value, const described::Path& path, Outcome& out) {
    described::read_named(value, path, out, outcome_named, outcome_names);
  }
  static nlohmann::json leaf_shape(const Outcome* /*kind*/) { return described::named_shape(outcome_names); }
};

}  // namespace

nlohmann::json to_json(const ServedConnection& connection) {
  return described::write<PersistentJson>(connection);
}

std::vector<described::SchemaShape> persistent_json_shapes() {
  return {{.schema = "common",
           .pointer = "/$defs/served_connection",
           .shape = described::shape<PersistentJson, ServedConnection>(),
           .extra_keys = {}},
          {.schema = "common",
           .pointer = "/$defs/earlier_connections",
           .shape = described::shape<PersistentJson, EarlierConnections>(),
           .extra_keys = {}}};
}

void EarlierConnections::fold(const ServedConnection& connection) {
  ++count;
  iterations += connection.iterations;
  bytes += connection.bytes;
  if (connection.outcome != Outcome::completed) ++failed;
}

nlohmann::json to_json(const EarlierConnections& earlier) {
  return described::write<PersistentJson>(earlier);
}

void ServedConnections::add_to(nlohmann::json& document) const {
  nlohmann::json records = nlohmann::json::array();
  for (const auto& served : history.latest()) {
    records.push_back(to_json(served));
  }
  document["connections"] = std::move(records);
  if (history.earlier().count > 0) document["earlier_connections"] = to_json(history.earlier());
}

void serve_counted(const std::function<void(ServedConnection&)>& serve, Report& report) {
  ServedConnection served;
  auto count = [&] {
    report.iterations_completed = served.iterations;
    report.bytes = served.bytes;
  };
  try {
    serve(served);
  } catch (...) {
    count();
    throw;
  }
  count();
}

ServedConnection serve_recorded(const AcceptedConnection& connection) {
  ServedConnection served;
  served.peer = connection.peer;
  try {
    connection.serve(served);
  } catch (const RunStopped& stopped) {
    served.outcome = outcome_of(stopped.reason());
    served.error = stopped.what();
  } catch (const std::exception& error) {
    served.outcome = Outcome::failed;
    served.error = error.what();
  }
  if (!served.error.empty()) {
    spdlog::warn("connection from {}: {}", served.peer, served.error);
  }
  return served;
}

void stop_serving(const RunStopped& stopped, Report& report) {
  spdlog::info("persistent server stopping: {}", stopped.what());
  if (stopped.reason() != StopReason::timed_out) report.outcome = outcome_of(stopped.reason());
}

void serve_persistently(const std::function<AcceptedConnection()>& accept, Report& report) {
  std::mutex records_mutex;
  ConnectionHistory records;
  // Totalled as they end: the list keeps only the latest.
  std::uint64_t iterations = 0;
  std::uint64_t bytes = 0;
  auto keep = [&](ServedConnection record) {
    const std::lock_guard lock(records_mutex);
    iterations += record.iterations;
    bytes += record.bytes;
    records.add(std::move(record));
  };
  struct Worker {
    std::shared_ptr<std::atomic<bool>> finished;
    std::jthread thread;
  };
  std::vector<Worker> workers;
  std::exception_ptr failure;
  try {
    int failures_in_a_row = 0;
    for (;;) {
      AcceptedConnection connection;
      try {
        connection = accept();
        failures_in_a_row = 0;
      } catch (const RunStopped&) {
        throw;
      } catch (const std::exception& error) {
        if (++failures_in_a_row >= accept_failures_before_giving_up) throw;
        spdlog::warn("accepting a connection failed: {}", error.what());
        keep(ServedConnection{
            .peer = {}, .iterations = 0, .bytes = 0, .outcome = Outcome::failed, .error = error.what()});
        continue;
      }
      // A finished thread keeps its stack until joined: reap them, or a long-lived server
      // grows by a stack per client served.
      std::erase_if(workers, [](const Worker& worker) { return worker.finished->load(); });
      auto finished = std::make_shared<std::atomic<bool>>(false);
      workers.push_back(Worker{finished, std::jthread([connection = std::move(connection), finished, &keep] {
                                 keep(serve_recorded(connection));
                                 finished->store(true);
                               })});
    }
  } catch (const RunStopped& stopped) {
    stop_serving(stopped, report);
  } catch (...) {
    failure = std::current_exception();
  }
  workers.clear();  // joins: a stop signal reaches every connection through its own waits
  report.iterations_completed += iterations;
  report.bytes += bytes;
  report.add(ServedConnections(std::move(records)));
  if (failure) std::rethrow_exception(failure);
}

}  // namespace rdmakit
