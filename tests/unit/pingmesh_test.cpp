#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "lib/base/error.hpp"
#include "lib/pingmesh/pinglist.hpp"
#include "lib/pingmesh/pingmesh_path.hpp"
#include "lib/pingmesh/pingmesh_probe.hpp"
#include "lib/pingmesh/pingmesh_report.hpp"
#include "lib/rdma/completion_clock.hpp"
#include "lib/topology/topology.hpp"

namespace rdmakit::pingmesh {
namespace {

constexpr std::uint64_t ms = 1'000'000;
constexpr std::uint64_t session = 0x5eed;

TEST(PingmeshProbe, RoundTripsAndIgnoresPadding) {
  const ProbeMessage probe{.kind = ProbeKind::probe, .session = session, .sequence = 7, .prober_sent_ns = 123};
  const auto bytes = encode(probe);
  EXPECT_EQ(bytes[0], std::uint8_t{'R'});
  EXPECT_EQ(bytes[3], std::uint8_t{'M'});
  EXPECT_EQ(decode_probe(bytes).outcome, ProbeDecode::ok);
  EXPECT_EQ(decode_probe(bytes).message, probe);
  const ProbeMessage answer = answer_to(probe, 1000, 1250);
  EXPECT_EQ(answer.kind, ProbeKind::answer);
  EXPECT_EQ(answer.sequence, 7U);
  EXPECT_EQ(answer.prober_sent_ns, 123U);
  EXPECT_EQ(answer.responder_delay_ns(), 250U);
  const auto answer_bytes = encode(answer);
  std::vector<std::uint8_t> padded(answer_bytes.begin(), answer_bytes.end());
  padded.resize(256, 0xab);
  EXPECT_EQ(decode_probe(padded).message, answer);
}

TEST(PingmeshProbe, TellsWhyADatagramIsNotOurs) {
  const ProbeMessage probe{.kind = ProbeKind::probe, .session = session, .sequence = 1, .prober_sent_ns = 5};
  auto bytes = encode(probe);
  EXPECT_EQ(decode_probe(std::span(bytes).first(probe_size - 1)).outcome, ProbeDecode::short_datagram);
  auto foreign = bytes;
  foreign[0] = 'G';
  EXPECT_EQ(decode_probe(foreign).outcome, ProbeDecode::foreign);
  auto newer = bytes;
  newer[4] = 2;
  EXPECT_EQ(decode_probe(newer).outcome, ProbeDecode::other_version);
  auto unknown_kind = bytes;
  unknown_kind[5] = 4;
  EXPECT_EQ(decode_probe(unknown_kind).outcome, ProbeDecode::malformed);
  auto reserved = bytes;
  reserved[7] = 2;
  EXPECT_EQ(decode_probe(reserved).outcome, ProbeDecode::malformed);
  // A probe carries no responder times; an answer's are in order and plausible.
  ProbeMessage stamped_probe = probe;
  stamped_probe.responder_sent_ns = 9;
  EXPECT_EQ(decode_probe(encode(stamped_probe)).outcome, ProbeDecode::malformed);
  EXPECT_EQ(decode_probe(encode(answer_to(probe, 500, 400))).outcome, ProbeDecode::malformed);
  EXPECT_EQ(decode_probe(encode(answer_to(probe, 0, max_responder_delay_ns))).outcome, ProbeDecode::malformed);
  EXPECT_EQ(decode_probe(encode(answer_to(probe, 0, max_responder_delay_ns - 1))).outcome, ProbeDecode::ok);
  EXPECT_EQ(to_string(ProbeDecode::other_version), "other_version");
}

TEST(PingmeshProbe, AProbeAsksForStampsAndStampsCarryTheDeviceDelay) {
  const ProbeMessage probe{
      .kind = ProbeKind::probe, .wants_stamps = true, .session = session, .sequence = 3, .prober_sent_ns = 77};
  const auto bytes = encode(probe);
  EXPECT_EQ(bytes[7], 1);
  EXPECT_EQ(decode_probe(bytes).message, probe);
  // The flag is a probe's: an answer or stamps carrying it are not ours.
  const ProbeMessage answer = answer_to(probe, 10, 20);
  EXPECT_FALSE(answer.wants_stamps);
  auto flagged_answer = encode(answer);
  flagged_answer[7] = 1;
  EXPECT_EQ(decode_probe(flagged_answer).outcome, ProbeDecode::malformed);
  const ProbeMessage stamps = stamps_for(probe, 4321);
  EXPECT_EQ(stamps.kind, ProbeKind::stamps);
  EXPECT_FALSE(stamps.wants_stamps);
  EXPECT_EQ(stamps.sequence, 3U);
  EXPECT_EQ(stamps.prober_sent_ns, 77U);
  EXPECT_EQ(stamps.responder_delay_ns(), 4321U);
  EXPECT_EQ(decode_probe(encode(stamps)).message, stamps);
  // Stamps carry a delay, not the responder's clock: its receive field stays 0.
  ProbeMessage with_receive_time = stamps;
  with_receive_time.responder_received_ns = 1;
  EXPECT_EQ(decode_probe(encode(with_receive_time)).outcome, ProbeDecode::malformed);
  EXPECT_EQ(decode_probe(encode(stamps_for(probe, max_responder_delay_ns))).outcome, ProbeDecode::malformed);
}

TEST(CompletionClock, TicksToNanosecondsAcrossAWrap) {
  EXPECT_FALSE(CompletionClock::of_device(0, 156250).has_value());
  EXPECT_FALSE(CompletionClock::of_device(0xffffffffffffULL, 0).has_value());
  // A 48-bit counter at 156.25 MHz: 156250 ticks a millisecond.
  const auto clock = CompletionClock::of_device(0xffffffffffffULL, 156250);
  ASSERT_TRUE(clock.has_value());
  EXPECT_EQ(clock->ns_between(1000, 1000 + 156250), 1'000'000U);
  EXPECT_EQ(clock->ns_between(0xffffffffffffULL - 99, 56), 998U);         // 156 ticks over the wrap
  EXPECT_EQ(clock->ns_between(0, 0xffffffffffffULL), 1801439850948192U);  // 2^48 - 1 ticks, no overflow
  const auto host = CompletionClock::nanoseconds();
  EXPECT_EQ(host.ns_between(5, 1'000'000'005), 1'000'000'000U);
}

TEST(CompletionClock, CoreClockMeasuredFromTwoCounterReadings) {
  // 156250 ticks over 1 ms: 156.25 MHz, 156250 kHz.
  EXPECT_EQ(measured_core_clock_khz({.host_ns = 1'000'000, .ticks = 500}, {.host_ns = 2'000'000, .ticks = 156750},
                                    0xffffffffffffULL),
            156250U);
  // Over a 48-bit counter's wrap: 1000 ticks before it, 155250 after, in 1 ms.
  EXPECT_EQ(measured_core_clock_khz({.host_ns = 0, .ticks = 0xffffffffffffULL - 999},
                                    {.host_ns = 1'000'000, .ticks = 155250}, 0xffffffffffffULL),
            156250U);
  // A 1 GHz counter over 10 ms: 10^7 ticks, 10^6 kHz (ticks times 10^6 would not fit 64 bits for long runs).
  EXPECT_EQ(measured_core_clock_khz({.host_ns = 0, .ticks = 0}, {.host_ns = 10'000'000, .ticks = 10'000'000},
                                    ~std::uint64_t{0}),
            1'000'000U);
  // No time between the readings says nothing.
  EXPECT_EQ(measured_core_clock_khz({.host_ns = 5, .ticks = 0}, {.host_ns = 5, .ticks = 100}, ~std::uint64_t{0}), 0U);
}

TEST(CompletionClock, NominalClockKeptUnlessTheCounterSaysOtherwise) {
  EXPECT_EQ(believed_core_clock_khz(156250, 0), 156250U);       // nothing measured
  EXPECT_EQ(believed_core_clock_khz(156250, 156400), 156250U);  // 0.1%: the samples' own error
  EXPECT_EQ(believed_core_clock_khz(156250, 1'000'000), 1'000'000U);
  EXPECT_EQ(believed_core_clock_khz(1'000'000, 156250), 156250U);
  EXPECT_EQ(believed_core_clock_khz(0, 78125), 78125U);  // a device that reports no rate
}

AnswerFields answer_of(const ProbeTicket& probe, std::uint64_t delay_ns) {
  return {probe.session, probe.sequence, probe.sent_ns, delay_ns};
}

TEST(PingmeshPath, RoundTripLessTheResponderDelay) {
  PathProbes path(session, 1000 * ms);
  const ProbeTicket first = path.next_probe(10 * ms);
  const ProbeTicket second = path.next_probe(20 * ms);
  EXPECT_EQ(first.sequence + 1, second.sequence);
  EXPECT_EQ(path.take_answer(answer_of(first, 1 * ms), 14 * ms), PathProbes::Match::answered);
  EXPECT_EQ(path.take_answer(answer_of(second, 2 * ms), 30 * ms), PathProbes::Match::answered);
  const WindowFigures window = path.close_window(40 * ms);
  EXPECT_EQ(window.sent, 2U);
  EXPECT_EQ(window.answered, 2U);
  EXPECT_EQ(window.lost, 0U);
  EXPECT_DOUBLE_EQ(window.loss_ratio, 0);
  ASSERT_TRUE(window.rtt.has_value());
  EXPECT_DOUBLE_EQ(window.rtt->min_us, 3000);  // 4 ms less 1 ms
  EXPECT_DOUBLE_EQ(window.rtt->max_us, 8000);  // 10 ms less 2 ms
  ASSERT_TRUE(window.responder_delay.has_value());
  EXPECT_DOUBLE_EQ(window.responder_delay->p50_us, 1000);
  // The next window starts from nothing.
  const WindowFigures empty = path.close_window(50 * ms);
  EXPECT_EQ(empty.sent + empty.answered + empty.lost, 0U);
  EXPECT_FALSE(empty.rtt.has_value());
}

// A path whose completions are stamped on the host's clock in ns (as --host-stamps): device
// stamps are then times like the host's, a little after the send and before the receive.
TEST(PingmeshPath, DeviceClocksOnceThePeerStamps) {
  PathProbes path(session, 1000 * ms, CompletionClock::nanoseconds());
  const ProbeTicket first = path.next_probe(10 * ms);
  path.probe_left(first.sequence, 11 * ms);
  // The peer's stamps are not known yet: the first answer is measured on the hosts' clocks.
  EXPECT_EQ(path.take_answer(answer_of(first, 2 * ms), 20 * ms, 19 * ms), PathProbes::Match::answered);
  EXPECT_FALSE(path.peer_stamps());
  EXPECT_TRUE(path.take_stamps(answer_of(first, 1 * ms)));
  EXPECT_TRUE(path.peer_stamps());
  // From now on the round trip waits for the stamps: 39 - 31 ms on the device, less 0.5 ms.
  const ProbeTicket second = path.next_probe(30 * ms);
  path.probe_left(second.sequence, 31 * ms);
  EXPECT_EQ(path.take_answer(answer_of(second, 2 * ms), 40 * ms, 39 * ms), PathProbes::Match::answered);
  // Stamps that name the answer but echo another send time, or another run: not taken.
  EXPECT_FALSE(path.take_stamps({session, second.sequence, second.sent_ns + 1, ms / 2}));
  EXPECT_FALSE(path.take_stamps({session + 1, second.sequence, second.sent_ns, ms / 2}));
  EXPECT_FALSE(path.take_stamps({session, second.sequence + 9, second.sent_ns, ms / 2}));
  EXPECT_TRUE(path.take_stamps(answer_of(second, ms / 2)));
  EXPECT_FALSE(path.take_stamps(answer_of(second, ms / 2)));  // once only
  const WindowFigures window = path.close_window(50 * ms);
  EXPECT_EQ(window.answered, 2U);
  EXPECT_EQ(window.device_samples, 1U);
  EXPECT_EQ(window.stamps_missing, 0U);
  ASSERT_TRUE(window.rtt.has_value());
  EXPECT_DOUBLE_EQ(window.rtt->min_us, 7500);  // the device's 8 ms less 0.5 ms
  EXPECT_DOUBLE_EQ(window.rtt->max_us, 8000);  // the hosts' 10 ms less 2 ms
  EXPECT_DOUBLE_EQ(window.responder_delay->min_us, 500);
}

TEST(PingmeshPath, StampsThatDoNotComeFallBackToTheHostsClocks) {
  PathProbes path(session, 100 * ms, CompletionClock::nanoseconds());
  const ProbeTicket first = path.next_probe(0);
  path.probe_left(first.sequence, 1 * ms);
  path.take_answer(answer_of(first, 0), 5 * ms, 4 * ms);
  ASSERT_TRUE(path.take_stamps(answer_of(first, 0)));
  const ProbeTicket second = path.next_probe(10 * ms);
  path.probe_left(second.sequence, 11 * ms);
  path.take_answer(answer_of(second, 1 * ms), 20 * ms, 19 * ms);
  // Not yet past its answer timeout: the answer still waits, in no window's figures.
  const WindowFigures waiting = path.close_window(50 * ms);
  EXPECT_EQ(waiting.answered, 2U);
  EXPECT_EQ(waiting.rtt->count, 1U);
  // Past it: the hosts' 10 ms less 1 ms, counted missing, and the path no longer waits.
  const WindowFigures missing = path.close_window(200 * ms);
  EXPECT_EQ(missing.stamps_missing, 1U);
  EXPECT_EQ(missing.device_samples, 0U);
  ASSERT_TRUE(missing.rtt.has_value());
  EXPECT_DOUBLE_EQ(missing.rtt->max_us, 9000);
  EXPECT_FALSE(path.peer_stamps());
  // Its stamps, late: the peer stamps after all, and the next answer waits for them again.
  EXPECT_TRUE(path.take_stamps(answer_of(second, 0)));
  EXPECT_TRUE(path.peer_stamps());
  // A device round trip longer than the host's is a stamp read wrong: the hosts' clocks.
  const ProbeTicket third = path.next_probe(300 * ms);
  path.probe_left(third.sequence, 250 * ms);
  path.take_answer(answer_of(third, 0), 310 * ms, 320 * ms);
  EXPECT_TRUE(path.take_stamps(answer_of(third, 0)));
  const WindowFigures wrong = path.close_window(400 * ms);
  EXPECT_EQ(wrong.device_samples, 0U);
  EXPECT_EQ(wrong.stamps_missing, 0U);
  EXPECT_DOUBLE_EQ(wrong.rtt->max_us, 10000);
  // A responder's device delay as long as the device's round trip leaves no network time:
  // stamps read late (rxe's send completions on a loaded host), the hosts' clocks again.
  const ProbeTicket fourth = path.next_probe(500 * ms);
  path.probe_left(fourth.sequence, 501 * ms);
  path.take_answer(answer_of(fourth, 1 * ms), 510 * ms, 509 * ms);
  EXPECT_TRUE(path.take_stamps(answer_of(fourth, 8 * ms)));
  const WindowFigures late = path.close_window(600 * ms);
  EXPECT_EQ(late.device_samples, 0U);
  EXPECT_DOUBLE_EQ(late.rtt->max_us, 9000);  // the hosts' 10 ms less their 1 ms
}

TEST(PingmeshPath, TheProbesSendCompletionMayComeAfterItsAnswer) {
  PathProbes path(session, 100 * ms, CompletionClock::nanoseconds());
  const ProbeTicket first = path.next_probe(0);
  path.take_answer(answer_of(first, 0), 5 * ms, 4 * ms);
  ASSERT_TRUE(path.take_stamps(answer_of(first, 0)));
  // The answer and its stamps before the probe's own send completion: the round trip waits.
  const ProbeTicket second = path.next_probe(10 * ms);
  path.take_answer(answer_of(second, 2 * ms), 20 * ms, 19 * ms);
  EXPECT_TRUE(path.take_stamps(answer_of(second, 1 * ms)));
  EXPECT_EQ(path.close_window(30 * ms).device_samples, 0U);
  path.probe_left(second.sequence, 11 * ms);
  const WindowFigures window = path.close_window(40 * ms);
  EXPECT_EQ(window.device_samples, 1U);
  EXPECT_DOUBLE_EQ(window.rtt->max_us, 7000);  // 19 - 11 ms less 1 ms
  // A probe whose send completion never comes: on the hosts' clocks, not counted missing.
  const ProbeTicket third = path.next_probe(50 * ms);
  path.take_answer(answer_of(third, 1 * ms), 60 * ms, 59 * ms);
  EXPECT_TRUE(path.take_stamps(answer_of(third, 0)));
  const WindowFigures unsent = path.close_window(300 * ms);
  EXPECT_EQ(unsent.device_samples + unsent.stamps_missing, 0U);
  EXPECT_DOUBLE_EQ(unsent.rtt->max_us, 9000);
  EXPECT_TRUE(path.peer_stamps());
}

TEST(PingmeshPath, RepliesThatAnswerNothingAreCountedNotTaken) {
  PathProbes path(session, 1000 * ms);
  const ProbeTicket probe = path.next_probe(10 * ms);
  // Another run's session, a sequence never sent, a wrong echo of the send time.
  EXPECT_EQ(path.take_answer({session + 1, probe.sequence, probe.sent_ns, 0}, 12 * ms), PathProbes::Match::unexpected);
  EXPECT_EQ(path.take_answer({session, probe.sequence + 5, probe.sent_ns, 0}, 12 * ms), PathProbes::Match::unexpected);
  EXPECT_EQ(path.take_answer({session, probe.sequence, probe.sent_ns + 1, 0}, 12 * ms), PathProbes::Match::unexpected);
  EXPECT_EQ(path.in_flight(), 1U);
  EXPECT_EQ(path.take_answer(answer_of(probe, 0), 12 * ms), PathProbes::Match::answered);
  // The same answer again (a duplicate, a replay): nothing in flight any more.
  EXPECT_EQ(path.take_answer(answer_of(probe, 0), 13 * ms), PathProbes::Match::unexpected);
  const WindowFigures window = path.close_window(20 * ms);
  EXPECT_EQ(window.answered, 1U);
  EXPECT_EQ(window.unexpected, 4U);
}

TEST(PingmeshPath, ProbesPastTheTimeoutAreLostAndTheirAnswersLate) {
  PathProbes path(session, 100 * ms);
  const ProbeTicket early = path.next_probe(0);
  const ProbeTicket recent = path.next_probe(950 * ms);
  // At the window's end (1 s) the first is 1 s old, the second 50 ms: one lost, one carried.
  const WindowFigures first = path.close_window(1000 * ms);
  EXPECT_EQ(first.sent, 2U);
  EXPECT_EQ(first.lost, 1U);
  EXPECT_EQ(first.answered, 0U);
  EXPECT_DOUBLE_EQ(first.loss_ratio, 1.0);
  EXPECT_EQ(path.in_flight(), 1U);
  EXPECT_EQ(path.take_answer(answer_of(recent, 0), 1010 * ms), PathProbes::Match::answered);
  EXPECT_EQ(path.take_answer(answer_of(early, 0), 1020 * ms), PathProbes::Match::late);
  const WindowFigures second = path.close_window(2000 * ms);
  EXPECT_EQ(second.sent, 0U);
  EXPECT_EQ(second.answered, 1U);
  EXPECT_EQ(second.late, 1U);
  EXPECT_EQ(second.lost, 0U);
}

// A drop lifted mid-window: the probes sent while the path was down time out in the window
// in which it answers again. They are lost, but that window is judged without them.
TEST(PingmeshPath, TheWindowThatComesBackIsJudgedWithoutTheOutage) {
  PathProbes path(session, 500 * ms);
  PathJudge judge(Thresholds{});
  for (std::uint64_t t = 0; t < 1000; t += 100) path.next_probe(t * ms);
  const WindowFigures gone = path.close_window(1000 * ms);
  EXPECT_EQ(judge.judge(gone).state, PathState::down);
  path.outage_began();
  // The next window: four more unanswered, then the path is back for the rest.
  for (std::uint64_t t = 1000; t < 1400; t += 100) path.next_probe(t * ms);
  for (std::uint64_t t = 1400; t < 2000; t += 100) {
    const ProbeTicket probe = path.next_probe(t * ms);
    EXPECT_EQ(path.take_answer(answer_of(probe, 0), t * ms + 2 * ms), PathProbes::Match::answered);
  }
  const WindowFigures back = path.close_window(2000 * ms);
  EXPECT_EQ(back.answered, 6U);
  EXPECT_EQ(back.lost, 8U);  // four carried from the last window, four from this one's start
  EXPECT_EQ(back.lost_in_outage, 8U);
  EXPECT_DOUBLE_EQ(back.loss_ratio, 0);
  const Verdict verdict = judge.judge(back);
  EXPECT_EQ(verdict.state, PathState::ok);
  EXPECT_EQ(verdict.why, "6 answered, 8 lost, RTT p99 2000.0 us (8 lost before the path came back)");
  // After it, a loss counts again.
  path.next_probe(2100 * ms);
  const ProbeTicket answered = path.next_probe(2200 * ms);
  path.take_answer(answer_of(answered, 0), 2201 * ms);
  const WindowFigures after = path.close_window(3000 * ms);
  EXPECT_EQ(after.lost, 1U);
  EXPECT_EQ(after.lost_in_outage, 0U);
  EXPECT_DOUBLE_EQ(after.loss_ratio, 0.5);
}

TEST(PingmeshPath, InFlightIsBounded) {
  PathProbes path(session, 1000'000 * ms);
  for (std::size_t i = 0; i < PathProbes::max_in_flight + 3; ++i) path.next_probe(i);
  EXPECT_EQ(path.in_flight(), PathProbes::max_in_flight);
  EXPECT_EQ(path.close_window(10).lost, 3U);
}

WindowFigures window_with(std::uint64_t answered, std::uint64_t lost, double p99_us) {
  WindowFigures window;
  window.sent = answered + lost;
  window.answered = answered;
  window.lost = lost;
  window.loss_ratio = answered + lost == 0 ? 0 : static_cast<double>(lost) / static_cast<double>(answered + lost);
  if (answered > 0) {
    window.rtt = LatencySummary{};
    window.rtt->count = answered;
    window.rtt->p99_us = p99_us;
  }
  return window;
}

TEST(PingmeshJudge, DownLossyOk) {
  PathJudge judge(Thresholds{});
  EXPECT_EQ(judge.state(), PathState::unknown);
  EXPECT_EQ(judge.judge(window_with(100, 0, 50)).state, PathState::ok);
  const Verdict down = judge.judge(window_with(0, 100, 0));
  EXPECT_EQ(down.state, PathState::down);
  EXPECT_EQ(down.why, "nothing answered: 100 probes lost");
  const Verdict lossy = judge.judge(window_with(98, 2, 50));
  EXPECT_EQ(lossy.state, PathState::lossy);
  EXPECT_EQ(lossy.why, "lost 2 of 100 probes (2.00%, above 1.00%)");
  EXPECT_EQ(judge.judge(window_with(99, 1, 50)).state, PathState::ok);  // 1% is not above 1%
  // A window with nothing resolved keeps the state.
  EXPECT_EQ(judge.judge(window_with(0, 0, 0)).state, PathState::ok);
}

TEST(PingmeshJudge, SlowAgainstItsOwnBaseline) {
  Thresholds thresholds;
  thresholds.slow_factor = 3.0;
  thresholds.baseline_windows = 3;
  PathJudge judge(thresholds);
  // No baseline yet: a high p99 is not slow.
  EXPECT_EQ(judge.judge(window_with(100, 0, 900)).state, PathState::ok);
  EXPECT_EQ(judge.judge(window_with(100, 0, 100)).state, PathState::ok);
  EXPECT_FALSE(judge.baseline_p99_us().has_value());
  EXPECT_EQ(judge.judge(window_with(100, 0, 110)).state, PathState::ok);
  ASSERT_TRUE(judge.baseline_p99_us().has_value());
  EXPECT_DOUBLE_EQ(*judge.baseline_p99_us(), 110);  // the median of 900, 100, 110
  EXPECT_EQ(judge.judge(window_with(100, 0, 330)).state, PathState::ok);
  const Verdict slow = judge.judge(window_with(100, 0, 331));
  EXPECT_EQ(slow.state, PathState::slow);
  EXPECT_EQ(slow.why, "RTT p99 331.0 us above 330.0 us (3 x the path's baseline 110.0 us)");
  EXPECT_EQ(judge.judge(window_with(100, 0, 120)).state, PathState::ok);
}

TEST(PingmeshJudge, FixedLimitWinsOverTheBaseline) {
  PathJudge judge(Thresholds{.p99_limit_s = 0.001});
  EXPECT_EQ(judge.judge(window_with(10, 0, 999)).state, PathState::ok);
  EXPECT_EQ(judge.judge(window_with(10, 0, 1001)).state, PathState::slow);
}

TEST(PingmeshJudge, TheNodeWhenAllItsPathsGoBad) {
  using States = std::vector<PathState>;
  EXPECT_TRUE(node_at_fault(States{PathState::down, PathState::down, PathState::lossy}));
  EXPECT_FALSE(node_at_fault(States{PathState::down, PathState::ok, PathState::down}));
  EXPECT_FALSE(node_at_fault(States{PathState::down}));  // one path: the path, or its peer
  EXPECT_FALSE(node_at_fault(States{PathState::unknown, PathState::unknown}));
}

TEST(Pinglist, AddressesAndNames) {
  const auto peers = parse_pinglist("# rack 1\n10.57.0.1 nodea\n\n10.57.0.2   # no name\nfd57::3 nodec\r\n", "p");
  ASSERT_EQ(peers.size(), 3U);
  EXPECT_EQ(peers[0], (Peer{"10.57.0.1", "nodea"}));
  EXPECT_EQ(peers[1], (Peer{"10.57.0.2", "10.57.0.2"}));
  EXPECT_EQ(peers[2], (Peer{"fd57::3", "nodec"}));
}

std::string refusal(std::string_view text) {
  try {
    parse_pinglist(text, "hosts");
  } catch (const UsageError& error) {
    return error.what();
  }
  return "taken";
}

TEST(Pinglist, RefusesWithTheLine) {
  EXPECT_EQ(refusal("10.57.0.1 a\nnot an address\n"), "hosts:2: 'not an address': expected ADDRESS [NAME]");
  EXPECT_EQ(refusal("\n\n10.57.0.300\n"), "hosts:3: '10.57.0.300' is not an IPv4 or IPv6 address");
  EXPECT_EQ(refusal("10.57.0.1 no/slash"),
            "hosts:1: 'no/slash' is not a host name (letters, digits, '.', '_', '-'; at most 64)");
  EXPECT_EQ(refusal("10.57.0.1 a\n10.57.0.1 b\n"), "hosts:2: 10.57.0.1 is already on line 1");
  EXPECT_EQ(refusal("10.57.0.1 a\n10.57.0.2 a\n"), "hosts:2: the name a is already on line 1");
}

std::vector<std::string> names_of(const TargetPlan& plan) {
  std::vector<std::string> names;
  for (const Target& target : plan.targets) names.push_back(target.peer.name);
  return names;
}

TEST(Pinglist, WithoutATopologyEveryPeerButThisNode) {
  const auto peers = parse_pinglist("10.0.0.1 a\n10.0.0.2 b\n10.0.0.3 c\n", "p");
  const TargetPlan plan = plan_targets(peers, mesh::Topology{}, "b", "", Rates{}, 0);
  EXPECT_EQ(names_of(plan), (std::vector<std::string>{"a", "c"}));
  EXPECT_DOUBLE_EQ(plan.targets[0].rate_per_s, 10);
  // Found by address too, when the list names this node otherwise.
  EXPECT_EQ(names_of(plan_targets(peers, mesh::Topology{}, "node-b", "10.0.0.2", Rates{}, 0)),
            (std::vector<std::string>{"a", "c"}));
}

TEST(Pinglist, TheLeafInFullOtherLeavesSampledInTurn) {
  const auto peers =
      parse_pinglist("10.0.0.1 a1\n10.0.0.2 a2\n10.0.1.1 b1\n10.0.1.2 b2\n10.0.1.3 b3\n10.0.2.9 x\n", "p");
  const auto topology = mesh::parse_slurm_topology("SwitchName=la Nodes=a[1-2]\nSwitchName=lb Nodes=b[1-3]\n", "t");
  const Rates rates{.sample_per_leaf = 2};
  const TargetPlan first = plan_targets(peers, topology, "a1", "", rates, 0);
  // a2 under a1's own leaf; x, under no leaf, a leaf of its own; two of lb's three.
  EXPECT_EQ(names_of(first), (std::vector<std::string>{"a2", "x", "b1", "b2"}));
  EXPECT_DOUBLE_EQ(first.targets[0].rate_per_s, 10);
  EXPECT_TRUE(first.targets[0].same_leaf);
  EXPECT_DOUBLE_EQ(first.targets[2].rate_per_s, 1);
  EXPECT_FALSE(first.targets[2].same_leaf);
  // The next round goes on from where this one stopped.
  EXPECT_EQ(names_of(plan_targets(peers, topology, "a1", "", rates, 1)),
            (std::vector<std::string>{"a2", "x", "b3", "b1"}));
}

TEST(Pinglist, TheCapScalesEveryRate) {
  const auto peers = parse_pinglist("10.0.0.1 a\n10.0.0.2 b\n10.0.0.3 c\n10.0.0.4 d\n", "p");
  const TargetPlan plan = plan_targets(peers, mesh::Topology{}, "a", "", Rates{.cap_per_s = 15}, 0);
  EXPECT_DOUBLE_EQ(plan.scale, 0.5);
  for (const Target& target : plan.targets) EXPECT_DOUBLE_EQ(target.rate_per_s, 5);
}

NodeSnapshot node_with_one_path() {
  NodeSnapshot node;
  node.node = "nodea";
  node.address = "10.57.0.1";
  PathSnapshot path;
  path.peer = Peer{"10.57.0.2", "nodeb"};
  path.sent_total = 120;
  path.answered_total = 118;
  path.lost_total = 2;
  path.last_window = window_with(99, 1, 250);
  path.verdict = Verdict{PathState::ok, "99 answered, 1 lost, RTT p99 250.0 us"};
  node.paths.push_back(path);
  node.ignored["foreign"] = 3;
  return node;
}

std::string metrics_text(const NodeSnapshot& node) {
  return openmetrics::render(metrics_families(node), openmetrics::Format::openmetrics);
}

TEST(PingmeshReport, MetricsNameEveryPathAndEndWithEof) {
  const std::string text = metrics_text(node_with_one_path());
  const std::string labels = R"(peer="nodeb",address="10.57.0.2",same_leaf="1")";
  for (const std::string& line :
       {"rdmakit_pingmesh_probes_sent_total{" + labels + "} 120",
        "rdmakit_pingmesh_probes_lost_total{" + labels + "} 2",
        "rdmakit_pingmesh_rtt_seconds{" + labels + R"(,quantile="0.99"} 0.00025)",
        "rdmakit_pingmesh_loss_ratio{" + labels + "} 0.01",
        "rdmakit_pingmesh_path_state{" + labels + R"(,rdmakit_pingmesh_path_state="ok"} 1)",
        "rdmakit_pingmesh_path_state{" + labels + R"(,rdmakit_pingmesh_path_state="down"} 0)",
        std::string(R"(rdmakit_pingmesh_datagrams_ignored_total{reason="foreign"} 3)"),
        std::string("# UNIT rdmakit_pingmesh_rtt_seconds seconds"), std::string("rdmakit_pingmesh_node_fault 0")}) {
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line << "\n" << text;
  }
  EXPECT_TRUE(text.ends_with("# EOF\n"));
}

// What node_exporter's textfile collector reads: no stateset or info type, no UNIT, no EOF,
// every TYPE line naming its samples.
TEST(PingmeshReport, TheTextfileIsPrometheusText) {
  const std::string text = openmetrics::render(textfile_families(metrics_families(node_with_one_path())),
                                               openmetrics::Format::prometheus_text);
  const std::string labels = R"(peer="nodeb",address="10.57.0.2",same_leaf="1")";
  for (const std::string& line :
       {std::string("# TYPE rdmakit_pingmesh_probes_sent_total counter"),
        std::string("# TYPE rdmakit_pingmesh_path_state gauge"), std::string("# TYPE rdmakit_pingmesh_info gauge"),
        "rdmakit_pingmesh_path_state{" + labels + R"(,rdmakit_pingmesh_path_state="ok"} 1)"}) {
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line << "\n" << text;
  }
  // node_exporter's own process_cpu_seconds_total is not ours to write.
  EXPECT_NE(text.find("# TYPE rdmakit_pingmesh_cpu_seconds_total counter\n"), std::string::npos) << text;
  for (const char* absent : {"stateset", "# UNIT", "# EOF", " info\n", "process_cpu_seconds"}) {
    EXPECT_EQ(text.find(absent), std::string::npos) << absent << "\n" << text;
  }
}

TEST(PingmeshReport, JsonLinesOfAWindowAndAChange) {
  const NodeSnapshot node = node_with_one_path();
  const nlohmann::json window = window_line(node, node.paths[0], 1700000000.5);
  EXPECT_EQ(window["event"], "window");
  EXPECT_EQ(window["peer"], "nodeb");
  EXPECT_EQ(window["answered"], 99);
  EXPECT_EQ(window["rtt_us"]["p99"], 250.0);
  EXPECT_TRUE(window["responder_delay_us"]["p50"].is_null());
  EXPECT_EQ(window["state"], "ok");
  const nlohmann::json change = state_line(node, &node.paths[0], PathState::ok, PathState::down, "nothing answered", 1);
  EXPECT_EQ(change["from"], "ok");
  EXPECT_EQ(change["to"], "down");
  EXPECT_TRUE(state_line(node, nullptr, PathState::ok, PathState::down, "all paths", 1)["peer"].is_null());
}

std::string file_text(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// What the monitoring files in doc/pingmesh name is what the tool writes: every
// rdmakit_pingmesh_* name in the alert rules and the dashboard is a sample name of the
// OpenMetrics text (a family, or a counter's _total, or the info's _info).
TEST(PingmeshReport, TheMonitoringFilesNameOnlyOurMetrics) {
  const std::string text = metrics_text(node_with_one_path());
  std::set<std::string> samples;
  // Sample names, and the families' own (a gauge with no sample in the example has its TYPE).
  const std::regex sample_name(R"(^(?:# TYPE )?(rdmakit_pingmesh_[a-z_]+)[{ ])");
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_search(line, match, sample_name)) samples.insert(match[1]);
  }
  ASSERT_GT(samples.size(), 10U);
  const std::regex named(R"(rdmakit_pingmesh_[a-z_]+)");
  for (const std::string file : {"doc/pingmesh/alerts.yml", "doc/pingmesh/grafana-dashboard.json"}) {
    const auto content = file_text(std::string(RDMAKIT_SOURCE_DIR) + "/" + file);
    ASSERT_FALSE(content.empty()) << file;
    std::size_t names = 0;
    for (auto it = std::sregex_iterator(content.begin(), content.end(), named); it != std::sregex_iterator(); ++it) {
      const std::string name = it->str();
      ++names;
      // The stateset's label has the family's name: a label, not a sample of its own.
      if (name == "rdmakit_pingmesh_path_state") continue;
      EXPECT_TRUE(samples.count(name) != 0) << file << " names " << name << ", which the tool does not write";
    }
    EXPECT_GT(names, 3U) << file;
  }
}

}  // namespace
}  // namespace rdmakit::pingmesh
