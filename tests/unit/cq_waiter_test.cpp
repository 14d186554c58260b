// The completion waiter's parts that need no device: the mode -e picks, the poll set's
// order and what its revents mean, a sleep on plain descriptors (a CM channel and the stop
// signal stand in as pipes), and the silence bound's arithmetic.

#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <string>

#include <gtest/gtest.h>

#include "lib/base/error.hpp"
#include "lib/base/wait.hpp"
#include "lib/rdma/cq_waiter.hpp"

namespace rdmakit {
namespace {

using std::chrono::milliseconds;

const auto waiter_t0 = Clock::time_point{} + std::chrono::hours(1);

class Pipe {
 public:
  Pipe() { EXPECT_EQ(pipe(fds_.data()), 0); }
  ~Pipe() {
    close(fds_[0]);
    close(fds_[1]);
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  int read_end() const { return fds_[0]; }
  void fire() const { ASSERT_EQ(write(fds_[1], "x", 1), 1); }

 private:
  std::array<int, 2> fds_{};
};

TEST(CompletionMode, EventsOnlyWhenAskedAndTheLoopWatchesItsCq) {
  EXPECT_EQ(choose_completion_mode(false), CompletionMode::busy_poll);
  EXPECT_EQ(choose_completion_mode(true), CompletionMode::events);
  // The write latency test watches memory for its answer: -e changes nothing there.
  EXPECT_EQ(choose_completion_mode(true, true), CompletionMode::busy_poll);
  EXPECT_EQ(choose_completion_mode(false, true), CompletionMode::busy_poll);
}

TEST(PollSet, ChannelsOnceThenCmChannelsThenTheStopSignal) {
  PollSet set;
  set.set_stop(9);
  set.add_cm(7);
  EXPECT_EQ(set.add_channel(3), 0u);
  EXPECT_EQ(set.add_channel(4), 1u);
  EXPECT_EQ(set.add_channel(3), 0u);  // two CQs on one channel: polled once
  set.add_cm(8);
  ASSERT_EQ(set.fds().size(), 5u);
  EXPECT_EQ(set.channels(), 2u);
  std::array<int, 5> order{};
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = set.fds()[i].fd;
  EXPECT_EQ(order, (std::array<int, 5>{3, 4, 7, 8, 9}));
  set.remove_cm(7);  // rdma_migrate_id to a fresh channel
  set.set_stop(-1);
  ASSERT_EQ(set.fds().size(), 3u);
  EXPECT_EQ(set.fds()[2].fd, 8);
}

TEST(PollSet, WokenByPriorityCompletionsThenCmThenStop) {
  PollSet set;
  set.add_channel(3);
  set.add_cm(7);
  set.set_stop(9);
  EXPECT_EQ(set.woken(0), Woken::timed_out);
  set.fds()[2].revents = POLLIN;
  EXPECT_EQ(set.woken(1), Woken::stopped);
  set.fds()[1].revents = POLLIN;
  EXPECT_EQ(set.woken(2), Woken::cm_event);
  set.fds()[0].revents = POLLIN;
  EXPECT_EQ(set.woken(3), Woken::completion);
}

TEST(CqWaiter, SleepEndsOnTheCmChannelTheStopSignalOrTheDeadline) {
  const Pipe cm;
  const Pipe stop;
  CqWaiter waiter(CompletionMode::events, stop.read_end());
  waiter.watch_cm(cm.read_end());
  EXPECT_TRUE(waiter.armed());  // no CQ to arm
  const auto started = Clock::now();
  EXPECT_EQ(waiter.sleep(started + milliseconds(30)), Woken::timed_out);
  EXPECT_GE(Clock::now() - started, milliseconds(30));
  cm.fire();
  EXPECT_EQ(waiter.sleep(Clock::now() + std::chrono::hours(1)), Woken::cm_event);
  stop.fire();
  EXPECT_EQ(waiter.sleep(Clock::now() + std::chrono::hours(1)), Woken::cm_event);  // the CM event is still unread
  waiter.forget_cm(cm.read_end());
  EXPECT_EQ(waiter.sleep(Clock::now() + std::chrono::hours(1)), Woken::stopped);
}

// SIGHUP, whose default would end the process, is taken from the descriptor once each time.
TEST(ReloadSignal, EachSighupIsTakenOnceAndWakesASleep) {
  const ReloadSignal reload;
  EXPECT_FALSE(reload.take());
  ASSERT_EQ(raise(SIGHUP), 0);
  CqWaiter waiter(CompletionMode::events, -1);
  waiter.watch_cm(reload.fd());
  EXPECT_EQ(waiter.sleep(Clock::now() + std::chrono::hours(1)), Woken::cm_event);
  EXPECT_TRUE(reload.take());
  EXPECT_FALSE(reload.take());
}

TEST(SilenceBound, PassesOnlyAfterTheLimitWithoutProgress) {
  SilenceBound silence(milliseconds(100), waiter_t0);
  EXPECT_EQ(silence.deadline(), waiter_t0 + milliseconds(100));
  EXPECT_FALSE(silence.passed(waiter_t0 + milliseconds(100)));
  EXPECT_TRUE(silence.passed(waiter_t0 + milliseconds(101)));
  silence.progressed(waiter_t0 + milliseconds(90));
  EXPECT_EQ(silence.deadline(), waiter_t0 + milliseconds(190));
  EXPECT_FALSE(silence.passed(waiter_t0 + milliseconds(150)));
  EXPECT_EQ(silence.limit_ms(), 100);
}

TEST(SilenceBound, NotedProgressIsDatedAtTheNextCheck) {
  SilenceBound silence(milliseconds(100), waiter_t0);
  silence.note_progress();
  EXPECT_FALSE(silence.passed(waiter_t0 + milliseconds(150)));  // progress dated 150
  EXPECT_EQ(silence.deadline(), waiter_t0 + milliseconds(250));
  EXPECT_TRUE(silence.passed(waiter_t0 + milliseconds(251)));
}

TEST(SilenceBound, WithoutALimitNeverPasses) {
  SilenceBound silence(std::nullopt, waiter_t0);
  EXPECT_EQ(silence.deadline(), Clock::time_point::max());
  EXPECT_FALSE(silence.passed(waiter_t0 + std::chrono::hours(24)));
  EXPECT_EQ(silence.limit_ms(), 0);
}

TEST(SilenceBound, FirstDeadlineMayDifferFromTheLimit) {
  // A server that waits forever for its first message, then bounds each silence.
  SilenceBound silence(milliseconds(100), waiter_t0, Clock::time_point::max());
  EXPECT_FALSE(silence.passed(waiter_t0 + std::chrono::hours(24)));
  silence.progressed(waiter_t0 + std::chrono::hours(24));
  EXPECT_TRUE(silence.passed(waiter_t0 + std::chrono::hours(24) + milliseconds(101)));
}

TEST(SilenceBound, CheckThrowsTimedOutWithTheCallersMessage) {
  SilenceBound silence(milliseconds(5), waiter_t0);
  EXPECT_NO_THROW(silence.check(waiter_t0 + milliseconds(5), [] { return std::string("unused"); }));
  try {
    silence.check(waiter_t0 + milliseconds(6),
                  [&] { return "nothing for " + std::to_string(silence.limit_ms()) + " ms"; });
    FAIL() << "no throw";
  } catch (const RunStopped& stopped) {
    EXPECT_EQ(stopped.reason(), StopReason::timed_out);
    EXPECT_STREQ(stopped.what(), "nothing for 5 ms");
  }
}

}  // namespace
}  // namespace rdmakit
