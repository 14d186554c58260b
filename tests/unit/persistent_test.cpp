#include "lib/tool/persistent.hpp"

#include <gtest/gtest.h>

#include <latch>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "lib/base/log.hpp"

namespace rdmakit {
namespace {

// A stand-in for an accepted connection: how many messages its client sends.
struct FakeConnection {
  std::uint64_t messages = 0;
};

// Hands out one request per entry of `clients`, then stops the server for `reason`.
class FakeListener {
 public:
  FakeListener(std::vector<std::uint64_t> clients, StopReason reason) : clients_(std::move(clients)), reason_(reason) {}
  ConnectionRequest<FakeConnection> next_request() {
    if (next_ == clients_.size()) throw RunStopped(reason_, "no more clients");
    const auto messages = clients_[next_];
    return {"peer" + std::to_string(next_++), std::make_unique<FakeConnection>(FakeConnection{messages})};
  }

 private:
  std::vector<std::uint64_t> clients_;
  StopReason reason_;
  std::size_t next_ = 0;
};

// Every tool installs its logger on the main thread before it serves (setup_logging, through
// ToolRunner); so do these tests. Otherwise a connection's thread made spdlog's registry on
// its first warning, inside libspdlog, which TSan does not see into: the main thread's next
// log line then read the logger with no edge TSan knew of (the registry's initialisation
// guard is checked inline there), and build-tsan reported a race that is none.
class ServeEachClient : public ::testing::Test {
 protected:
  void SetUp() override { setup_logging("persistent_test", spdlog::level::warn); }
};

TEST_F(ServeEachClient, TotalsEveryClientAndEndsNormallyOnTheIdleTimeout) {
  FakeListener listener({3, 5}, StopReason::timed_out);
  Report report;
  std::vector<std::thread::id> serving_threads;
  std::mutex threads_mutex;
  serve_each_client([&] { return listener.next_request(); },
                    [&](FakeConnection& connection, Report& connection_report, ServedConnection& served) {
                      EXPECT_NE(&connection_report, &report);  // a connection's steps stay out of the totals
                      {
                        const std::lock_guard lock(threads_mutex);
                        serving_threads.push_back(std::this_thread::get_id());
                      }
                      served.iterations = connection.messages;
                      served.bytes = 16 * connection.messages;
                    },
                    report);
  EXPECT_EQ(report.iterations_completed, 8u);
  EXPECT_EQ(report.bytes, 128u);
  EXPECT_EQ(to_json(report)["connections"].size(), 2u);
  EXPECT_EQ(report.outcome, Report().outcome);  // the idle timeout is a normal end
  for (const auto id : serving_threads) EXPECT_NE(id, std::this_thread::get_id());
}

TEST_F(ServeEachClient, AFailingClientIsItsOwnRecordAndAnInterruptEndsTheServer) {
  FakeListener listener({1, 2}, StopReason::interrupted);
  Report report;
  serve_each_client([&] { return listener.next_request(); },
                    [](FakeConnection& connection, Report&, ServedConnection& served) {
                      served.iterations = connection.messages;
                      if (connection.messages == 1) throw std::runtime_error("client sent garbage");
                    },
                    report);
  EXPECT_EQ(report.outcome, Outcome::interrupted);
  EXPECT_EQ(report.iterations_completed, 3u);
  const auto connections = to_json(report)["connections"];
  ASSERT_EQ(connections.size(), 2u);
  int failed = 0;
  for (const auto& record : connections) {
    if (record["outcome"] == "failed") {
      ++failed;
      EXPECT_EQ(record["peer"], "peer0");
      EXPECT_EQ(record["error"], "client sent garbage");
    }
  }
  EXPECT_EQ(failed, 1);
}

// Many clients at once, as rdma_server -P meets them (run under TSan in build-tsan): the
// even ones are held until all of them run, so they overlap; the odd ones end at once, so
// the accepting thread reaps finished workers while others are still recording theirs.
TEST_F(ServeEachClient, ManyClientsAtOnceOverlapAndAreEachRecorded) {
  constexpr std::uint64_t clients = 32;
  std::vector<std::uint64_t> messages(clients);
  for (std::uint64_t i = 0; i < clients; ++i) messages[i] = i;
  FakeListener listener(messages, StopReason::timed_out);
  Report report;
  std::latch held(clients / 2);
  serve_each_client([&] { return listener.next_request(); },
                    [&](FakeConnection& connection, Report&, ServedConnection& served) {
                      if (connection.messages % 2 == 0) held.arrive_and_wait();
                      served.iterations = connection.messages;
                      served.bytes = 16 * connection.messages;
                    },
                    report);
  EXPECT_EQ(report.iterations_completed, clients * (clients - 1) / 2);
  EXPECT_EQ(report.bytes, 16 * clients * (clients - 1) / 2);
  const auto connections = to_json(report)["connections"];
  ASSERT_EQ(connections.size(), clients);
  for (const auto& record : connections) EXPECT_EQ(record["outcome"], "completed");
}

TEST(StopServing, OnlyAnInterruptIsTheServersOutcome) {
  Report timed_out;
  stop_serving(RunStopped(StopReason::timed_out, "no client"), timed_out);
  EXPECT_EQ(timed_out.outcome, Report().outcome);
  Report interrupted;
  stop_serving(RunStopped(StopReason::interrupted, "Ctrl-C"), interrupted);
  EXPECT_EQ(interrupted.outcome, Outcome::interrupted);
}

}  // namespace
}  // namespace rdmakit
