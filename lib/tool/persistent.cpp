#include "lib/tool/persistent.hpp"

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"

namespace rdmakit {

namespace {

// A listener that fails this often without one success in between is not coming back.
constexpr int accept_failures_before_giving_up = 8;

}  // namespace

nlohmann::json to_json(const ServedConnection& connection) {
  return {{"peer", connection.peer},
          {"iterations", connection.iterations},
          {"bytes", connection.bytes},
          {"outcome", to_string(connection.outcome)},
          {"error", connection.error}};
}

void EarlierConnections::fold(const ServedConnection& connection) {
  ++count;
  iterations += connection.iterations;
  bytes += connection.bytes;
  if (connection.outcome != Outcome::completed) ++failed;
}

nlohmann::json to_json(const EarlierConnections& earlier) {
  return {{"count", earlier.count},
          {"iterations", earlier.iterations},
          {"bytes", earlier.bytes},
          {"failed", earlier.failed}};
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
