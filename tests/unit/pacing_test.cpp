#include "lib/send_bw/pacing.hpp"

#include <gtest/gtest.h>

#include "lib/base/error.hpp"

namespace rdmakit {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

const Clock::time_point t0{};

TEST(SignalInterval, HalfTheQueueBetweenOneAnd64) {
  EXPECT_EQ(signal_interval(1), 1u);
  EXPECT_EQ(signal_interval(2), 1u);
  EXPECT_EQ(signal_interval(10), 5u);
  EXPECT_EQ(signal_interval(128), 64u);
  EXPECT_EQ(signal_interval(4096), 64u);
}

TEST(SignalSchedule, EveryNthAndTheLast) {
  const SignalSchedule schedule(4);
  EXPECT_FALSE(schedule.signalled(1, 10));
  EXPECT_TRUE(schedule.signalled(4, 10));
  EXPECT_TRUE(schedule.signalled(8, 10));
  EXPECT_FALSE(schedule.signalled(9, 10));
  EXPECT_TRUE(schedule.signalled(10, 10));
}

TEST(SignalSchedule, LargeMessagesAreSignalledMoreOften) {
  EXPECT_EQ(SignalSchedule::for_message_size(64, 64).every(), 64u);
  EXPECT_EQ(SignalSchedule::for_message_size(1u << 20, 64).every(), 16u);  // 16 MiB between signals
  EXPECT_EQ(SignalSchedule::for_message_size(8u << 20, 64).every(), 2u);
  EXPECT_EQ(SignalSchedule::for_message_size(64u << 20, 64).every(), 1u);  // never fewer than every one
  EXPECT_EQ(SignalSchedule::for_message_size(64, 8).every(), 8u);
}

TEST(PeakRate, KeepsTheFastestWindowOfEnoughMessages) {
  PeakRate peak(10, t0);
  peak.record(5, t0 + milliseconds(1));  // too few for a window
  EXPECT_EQ(peak.fastest_messages(), 0u);
  peak.record(10, t0 + milliseconds(10));  // 10 in 10 ms
  EXPECT_EQ(peak.fastest_messages(), 10u);
  EXPECT_EQ(peak.fastest(), milliseconds(10));
  peak.record(30, t0 + milliseconds(15));  // 20 in 5 ms: faster
  EXPECT_EQ(peak.fastest_messages(), 20u);
  EXPECT_EQ(peak.fastest(), milliseconds(5));
  peak.record(40, t0 + milliseconds(35));  // 10 in 20 ms: slower, kept out
  EXPECT_EQ(peak.fastest_messages(), 20u);
  EXPECT_EQ(peak.fastest(), milliseconds(5));
}

TEST(PeakRate, EqualRateKeepsTheFirst) {
  PeakRate peak(2, t0);
  peak.record(2, t0 + milliseconds(2));
  peak.record(6, t0 + milliseconds(6));  // same rate, more messages
  EXPECT_EQ(peak.fastest_messages(), 2u);
}

TEST(StreamLedger, PostsInBatchesBoundedByDepthAndTarget) {
  StreamLedger ledger(1, Budget{.iterations = 100, .duration = std::nullopt}, SignalSchedule(8), false, t0);
  EXPECT_EQ(ledger.postable(0, 32, 40), 32u);
  ledger.posted(0, 32);
  EXPECT_EQ(ledger.next_number(0, 0), 33u);
  EXPECT_EQ(ledger.postable(0, 32, 40), 8u);  // 40 in flight at most
  ledger.posted(0, 8);
  EXPECT_EQ(ledger.postable(0, 32, 40), 0u);
  ledger.completed_through(0, 32);
  EXPECT_EQ(ledger.total(), 32u);
  EXPECT_EQ(ledger.postable(0, 32, 40), 32u);
  ledger.posted(0, 32);
  ledger.posted(0, 28);
  EXPECT_EQ(ledger.postable(0, 32, 200), 0u);  // the target is reached
  EXPECT_TRUE(ledger.signalled(0, 100));
  EXPECT_FALSE(ledger.signalled(0, 99));
  EXPECT_TRUE(ledger.signalled(0, 96));
}

TEST(StreamLedger, FinishedWhenEveryLaneCompletedItsTarget) {
  StreamLedger ledger(2, Budget{.iterations = 10, .duration = std::nullopt}, SignalSchedule(5), false, t0);
  ledger.posted(0, 10);
  ledger.posted(1, 10);
  ledger.completed_through(0, 10);
  EXPECT_FALSE(ledger.finished());
  ledger.completed_through(1, 5);
  ledger.completed_through(1, 10);
  EXPECT_TRUE(ledger.finished());
  EXPECT_EQ(ledger.completed(), 20u);
  ledger.progressed(t0 + milliseconds(2));
  const auto row = ledger.row(64);
  EXPECT_EQ(row.iterations, 20u);
  EXPECT_EQ(row.size, 64u);
}

TEST(StreamLedger, BidirectionalWaitsForTheReflections) {
  StreamLedger ledger(1, Budget{.iterations = 4, .duration = std::nullopt}, SignalSchedule(2), true, t0);
  ledger.posted(0, 4);
  ledger.completed_through(0, 4);
  EXPECT_FALSE(ledger.finished());
  ledger.received(0, 3);
  EXPECT_FALSE(ledger.finished());
  ledger.received(0, 1);
  EXPECT_TRUE(ledger.finished());
  EXPECT_EQ(ledger.total(), 8u);
  EXPECT_EQ(ledger.row(8).iterations, 8u);  // both directions
}

TEST(StreamLedger, DurationClosesAtTheNextSignalledRequest) {
  StreamLedger ledger(1, Budget{.iterations = 0, .duration = milliseconds(10)}, SignalSchedule(8), false, t0);
  ledger.posted(0, 13);
  ledger.close_if_due(t0 + milliseconds(9));
  EXPECT_EQ(ledger.postable(0, 32, 64), 32u);  // still open
  ledger.close_if_due(t0 + milliseconds(10));
  EXPECT_EQ(ledger.lane(0).target, 16u);  // round_up(13, 8)
  EXPECT_EQ(ledger.postable(0, 32, 64), 3u);
  ledger.posted(0, 3);
  EXPECT_TRUE(ledger.signalled(0, 16));
  ledger.completed_through(0, 16);
  EXPECT_TRUE(ledger.finished());
  ledger.close_if_due(t0 + milliseconds(20));  // closes once only
  EXPECT_EQ(ledger.lane(0).target, 16u);
}

TEST(StreamLedger, NumbersGoOnPast2To32) {
  StreamLedger ledger(1, Budget{.iterations = std::uint64_t{1} << 33, .duration = std::nullopt}, SignalSchedule(8),
                      false, t0);
  ledger.posted(0, 0xffffffffu);
  ledger.completed_through(0, 0xffffffffu);
  ledger.posted(0, 10);
  EXPECT_EQ(ledger.next_number(0, 0), 0x100000009u + 1);
  ledger.completed_through(0, 9);  // the id's sequence wrapped
  EXPECT_EQ(ledger.lane(0).completed, 0x100000009u);
  EXPECT_EQ(ledger.total(), 0x100000009u);
}

TEST(StreamLedger, RowCountsNoMoreThanTheTarget) {
  StreamLedger ledger(1, Budget{.iterations = 0, .duration = milliseconds(1)}, SignalSchedule(4), false, t0);
  ledger.posted(0, 6);
  ledger.completed_through(0, 4);
  ledger.progressed(t0 + milliseconds(2));  // closes: target 8
  EXPECT_EQ(ledger.row(1).iterations, 4u);
}

TEST(SendBacklog, IdsCarryTheGeneration) {
  SendBacklog sends(7);
  EXPECT_EQ(sends.next_id(), (WorkId{.kind = WorkKind::send, .owner = 7, .sequence = 1}));
  EXPECT_EQ(sends.next_id(), (WorkId{.kind = WorkKind::send, .owner = 7, .sequence = 2}));
}

TEST(SendBacklog, OneInSixteenSignalled) {
  SendBacklog sends(1);
  for (std::uint32_t i = 1; i < latency_signal_every; ++i) {
    sends.next_id();
    EXPECT_FALSE(sends.signalled(false));
    EXPECT_TRUE(sends.signalled(true));
  }
  sends.next_id();
  EXPECT_TRUE(sends.signalled(false));
}

TEST(SendBacklog, BacklogWhenTwoIntervalsAreUnaccountedFor) {
  SendBacklog sends(3);
  WorkId id;
  for (std::uint32_t i = 0; i < 2 * latency_signal_every - 1; ++i) id = sends.next_id();
  EXPECT_FALSE(sends.backlog());
  id = sends.next_id();
  EXPECT_TRUE(sends.backlog());
  sends.completed(WorkId{.kind = WorkKind::send, .owner = 2, .sequence = 32});  // an earlier generation's: ignored
  EXPECT_TRUE(sends.backlog());
  sends.completed(WorkId{.kind = WorkKind::send, .owner = 3, .sequence = id.sequence - 16});
  EXPECT_FALSE(sends.backlog());
  sends.completed(WorkId{.kind = WorkKind::send, .owner = 3, .sequence = id.sequence - 20});  // older: no step back
  EXPECT_FALSE(sends.backlog());
}

TEST(SinkLedger, OneRowPerSizeFromFirstArrivalToLast) {
  SinkLedger ledger(1, false, SignalSchedule(4));
  ledger.arrived(0, 64, t0 + milliseconds(1));
  ledger.arrived(0, 64, t0 + milliseconds(3));
  ledger.arrived(0, 8, t0 + milliseconds(4));
  std::vector<BandwidthRow> rows;
  ledger.close_runs(rows);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].size, 8u);
  EXPECT_EQ(rows[0].iterations, 1u);
  EXPECT_EQ(rows[1].size, 64u);
  EXPECT_EQ(rows[1].iterations, 2u);
  ledger.close_runs(rows);
  EXPECT_EQ(rows.size(), 2u);     // runs are forgotten once closed
  EXPECT_EQ(ledger.owed(0), 0u);  // not reflecting
}

TEST(SinkLedger, ReflectsWhatArrivedSignallingTheLastOwed) {
  SinkLedger ledger(1, true, SignalSchedule(4));
  for (int i = 0; i < 5; ++i) ledger.arrived(0, 32, t0);
  std::vector<SinkLedger::Reflection> posted;
  while (ledger.owes(0, 3)) posted.push_back(ledger.next_reflection(0));
  ASSERT_EQ(posted.size(), 3u);  // depth 3
  EXPECT_EQ(posted[0].number, 1u);
  EXPECT_EQ(posted[0].size, 32u);
  EXPECT_FALSE(posted[0].signalled);
  EXPECT_FALSE(posted[2].signalled);
  ledger.completed_through(0, 2);
  while (ledger.owes(0, 3)) posted.push_back(ledger.next_reflection(0));
  ASSERT_EQ(posted.size(), 5u);
  EXPECT_TRUE(posted[3].signalled);  // every 4th
  EXPECT_TRUE(posted[4].signalled);  // the last owed
  EXPECT_EQ(ledger.owed(0), 0u);
}

TEST(SinkLedger, ClientMovingOnWithMessagesUnansweredIsAProtocolError) {
  SinkLedger ledger(2, true, SignalSchedule(4));
  ledger.arrived(0, 32, t0);
  ledger.arrived(1, 64, t0);  // another lane owes its own
  try {
    ledger.arrived(0, 64, t0);
    FAIL() << "no ProtocolError";
  } catch (const ProtocolError& e) {
    EXPECT_STREQ(e.what(), "the client moved to 64-byte messages with 1 32-byte ones unanswered");
  }
  while (ledger.owes(1, 8)) ledger.next_reflection(1);
  ledger.arrived(1, 128, t0);  // everything answered: a new size is fine
  EXPECT_EQ(ledger.owed(1), 1u);
}

TEST(SinkLedger, EndsWhenEveryLaneIsClosed) {
  SinkLedger ledger(2, false, SignalSchedule(4));
  ledger.close(1);
  EXPECT_TRUE(ledger.closed(1));
  EXPECT_FALSE(ledger.all_closed());
  ledger.close(0);
  EXPECT_TRUE(ledger.all_closed());
}

TEST(IntervalRecorder, CutsTheRunningTotalAtEachIntervalsEnd) {
  const auto start = Clock::now();
  using std::chrono::milliseconds;
  IntervalRecorder recorder(milliseconds(100), start);
  recorder.record(50, start + milliseconds(40));    // inside the first interval
  recorder.record(120, start + milliseconds(105));  // closes it: 120 in 105 ms
  recorder.record(130, start + milliseconds(150));
  recorder.record(400, start + milliseconds(420));  // a stall: one long interval, the next end at 500 ms
  recorder.record(450, start + milliseconds(480));
  recorder.finish(460, start + milliseconds(530));  // the rest: from 420 to 530 ms
  const auto& samples = recorder.samples();
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[0].messages, 120u);
  EXPECT_NEAR(samples[0].seconds, 0.105, 1e-9);
  EXPECT_EQ(samples[1].messages, 280u);
  EXPECT_NEAR(samples[1].end_s, 0.420, 1e-9);
  EXPECT_EQ(samples[2].messages, 60u);
  EXPECT_NEAR(samples[2].seconds, 0.110, 1e-9);
  std::uint64_t sum = 0;
  for (const auto& s : samples) sum += s.messages;
  EXPECT_EQ(sum, 460u);
  // Nothing after the last interval: no empty tail.
  IntervalRecorder quiet(milliseconds(100), start);
  quiet.record(10, start + milliseconds(100));
  quiet.finish(10, start + milliseconds(130));
  EXPECT_EQ(quiet.samples().size(), 1u);
}

TEST(RatePacer, AllowsWhatTheRateHasEarnedSinceTheStart) {
  const auto start = Clock::now();
  using std::chrono::milliseconds;
  RatePacer pacer(1000, start);              // a message a millisecond
  EXPECT_EQ(pacer.allowance(0, start), 1u);  // the first goes at once
  EXPECT_EQ(pacer.allowance(1, start), 0u);
  EXPECT_EQ(pacer.allowance(1, start + milliseconds(10)), 10u);
  EXPECT_EQ(pacer.allowance(32, start + milliseconds(10)), 0u);  // a post list ahead: wait
  EXPECT_EQ(pacer.allowance(560, start + milliseconds(600)), 41u);
}

TEST(RatePacer, CatchesUpAtMostFiftyMillisecondsAfterAStall) {
  const auto start = Clock::now();
  using std::chrono::milliseconds;
  RatePacer pacer(1000, start);
  EXPECT_EQ(pacer.allowance(0, start), 1u);
  // Held up 300 ms: 301 earned, 50 allowed at once, the rest forgiven.
  EXPECT_EQ(pacer.allowance(1, start + milliseconds(300)), 50u);
  EXPECT_EQ(pacer.allowance(51, start + milliseconds(300)), 0u);
  // From there on the rate again: 10 ms later, 10 more.
  EXPECT_EQ(pacer.allowance(51, start + milliseconds(310)), 10u);
  // A slow rate still lets one go.
  RatePacer slow(2, start);
  EXPECT_EQ(slow.allowance(0, start + milliseconds(5000)), 1u);
}

}  // namespace
}  // namespace rdmakit
