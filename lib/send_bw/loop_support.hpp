#pragma once
// What the measurement loops (lib/send_bw/loops, lib/send_bw/datagram_end) share: polling a
// lane's CQ, posting, failing on an error completion, and SpinGuard, which decides when an
// idle loop looks at the clock and the stop signal (or sleeps, with -e).

#include <infiniband/verbs.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/base/wait.hpp"
#include "lib/rdma/cq_waiter.hpp"
#include "lib/rdma/verbs.hpp"
#include "lib/rdma/work_id.hpp"
#include "lib/send_bw/lane.hpp"

namespace rdmakit::loop {

constexpr std::size_t poll_batch = 16;
// Empty polls between looks at the clock and the stop signal.
constexpr std::uint32_t spins_between_checks = 1024;
// Ids (lib/rdma/work_id.hpp): receives are all alike; sends carry their number modulo 2^32
// and, in the latency loops, their poster's generation as owner.
constexpr WorkId receive_work{.kind = WorkKind::receive, .owner = 0, .sequence = 0};

bool is_receive(const ibv_wc& wc);
// -c UD: whether a receive is a control datagram (bw::DatagramCounts, marked by its
// immediate), and the GRH in front of what arrived on `lane`.
bool is_datagram_counts(const ibv_wc& wc);
ibv_grh received_grh(const Lane& lane);
// Whether the stop signal (Ctrl-C) fired; never waits.
bool stop_requested(int stop_fd);
// Throws the CompletionError of an error completion.
[[noreturn]] void fail_completion(const ibv_wc& wc);
// The failures of poll_lane() and post(), out of line: those two are the measured loops' own.
[[noreturn]] void fail_poll(int returned);
void fail_post(int returned, std::uint32_t size);  // throws (check_returned)
// Up to poll_batch completions of `lane`'s CQ into `wcs`; how many.
// Inline, as post() and ticks_now(): a latency sample spans them, and each call and return
// is a lookup of its own under an emulator (the TCG guest).
inline int poll_lane(const Lane& lane, std::array<ibv_wc, poll_batch>& wcs) {
  const int got = ibv_poll_cq(lane.cq, static_cast<int>(poll_batch), wcs.data());
  if (got < 0) [[unlikely]]
    fail_poll(got);
  return got;
}
// ibv_post_send of a request or post list; RdmaError naming `size` bytes on failure.
inline void post(ibv_qp* qp, ibv_send_wr* wr, std::uint32_t size) {
  ibv_send_wr* bad = nullptr;
  if (const int rc = ibv_post_send(qp, wr, &bad); rc != 0) [[unlikely]]
    fail_post(rc, size);
}

// Says when an idle loop should look at the clock, the stop signal and the connection:
// every spins_between_checks empty polls, and then only if checks_apart has passed, so the
// system calls behind those looks stay off the path of a latency measurement. A loop that
// keeps finding work also calls check_stop_while_busy() on each iteration that made
// progress: a process starved of CPU on a loaded host can stay behind its pacer or its peer
// for a whole run and never meet an empty CQ, and a Ctrl-C must still end it within
// checks_apart of its next turn on a CPU.
class SpinGuard {
 public:
  // `silence`: how long check_stop() lets the peer send nothing (none: as long as it stays
  // connected). `sleep_on`: completion events (-e), the idle loop sleeps on these lanes'
  // CQs rather than spinning (empty: it spins), after `spins_before_sleep` empty polls.
  // `cm_fds`: the connection's CM event channels. With them a sleep lasts until a
  // completion, a CM event, Ctrl-C or the silence bound, as nothing else can end the loop;
  // without them it wakes every checks_apart to ask whether the peer is still there.
  explicit SpinGuard(int stop_fd, std::optional<std::chrono::milliseconds> silence = std::nullopt,
                     std::span<const Lane> sleep_on = {}, std::uint32_t spins_before_sleep = 0,
                     std::span<const int> cm_fds = {})
      : stop_fd_(stop_fd),
        silence_(silence, last_check_),
        spins_before_sleep_(spins_before_sleep),
        waiter_(sleep_on.empty() ? CompletionMode::busy_poll : CompletionMode::events, stop_fd),
        cm_fds_(cm_fds.begin(), cm_fds.end()) {
    for (const auto& lane : sleep_on) waiter_.watch(lane.cq);
    for (const int fd : cm_fds_) waiter_.watch_cm(fd);
  }
  bool due() {
    if (waiter_.sleeps()) {
      if (++idle_spins_ < spins_before_sleep_) return false;
      // Armed, the caller polls once more before the sleep: nothing slips in between.
      if (!waiter_.armed()) {
        waiter_.arm();
        return false;
      }
      idle_spins_ = 0;
      // Woken by anything but a completion, the caller must look now, whenever it last did.
      if (waiter_.sleep(wake_at()) != Woken::completion) {
        last_check_ = Clock::now();
        return true;
      }
    } else if (++spins_ % spins_between_checks != 0) {
      return false;
    }
    return checks_apart_passed();
  }
  // check_stop() for an iteration that made progress, every busy_spins_between_checks of
  // them and then only if checks_apart has passed; `where()` names the place for the error.
  template <class Where>
  void check_stop_while_busy(const Where& where) {
    if (++busy_spins_ % busy_spins_between_checks == 0 && checks_apart_passed()) check_stop(where());
  }
  // The peer has gone and the caller drains until `until`: its CM channels, which may still
  // raise events nobody takes now, no longer end a sleep, and the sleep ends by `until`.
  void peer_gone(Clock::time_point until) {
    for (const int fd : cm_fds_) waiter_.forget_cm(fd);
    wake_by_ = until;
  }
  // A flag, not a clock read: the loop calls it on every completion it takes.
  void saw_progress() { silence_.note_progress(); }
  // `still_working`: asked when the silence bound passes, true to give the peer the bound
  // again (PeerWatch::still_working); `sign` names what it looks at, for the message.
  void alive_while(std::function<bool()> still_working, std::string sign) {
    still_working_ = std::move(still_working);
    still_working_sign_ = std::move(sign);
  }
  void check_stop(const std::string& where) {
    if (stop_requested(stop_fd_)) {
      throw RunStopped(StopReason::interrupted, "interrupted " + where);
    }
    if (still_working_ && silence_.passed(last_check_) && still_working_()) silence_.progressed(last_check_);
    silence_.check(last_check_, [&] {
      return fmt::format("nothing from the peer for {} ms{} {}", silence_.limit_ms(),
                         still_working_ ? fmt::format(" (nor on {})", still_working_sign_) : std::string(), where);
    });
  }

 private:
  // One clock read: true, and the check's time kept, once checks_apart has passed since the
  // last check, busy or idle.
  bool checks_apart_passed() {
    const auto now = Clock::now();
    if (now - last_check_ < checks_apart) return false;
    last_check_ = now;
    return true;
  }
  // When a sleep must end. Watching the CM channels, at the silence bound or the drain's end
  // (progress noted since the last check dated now, so the bound is the current one);
  // otherwise after checks_apart, to poll the connection.
  Clock::time_point wake_at() {
    const auto now = Clock::now();
    if (cm_fds_.empty() && wake_by_ == Clock::time_point::max()) return now + checks_apart;
    if (silence_.passed(now)) return now;
    return std::min(silence_.deadline(), wake_by_);
  }

  static constexpr auto checks_apart = std::chrono::milliseconds(20);
  // An iteration with progress posts or reaps up to a batch of requests, microseconds of
  // work: one clock read per 64 of them is lost in it.
  static constexpr std::uint32_t busy_spins_between_checks = 64;
  int stop_fd_;
  Clock::time_point last_check_ = Clock::now();
  SilenceBound silence_;
  std::function<bool()> still_working_;
  std::string still_working_sign_;
  std::uint32_t spins_before_sleep_;
  CqWaiter waiter_;
  std::vector<int> cm_fds_;
  Clock::time_point wake_by_ = Clock::time_point::max();
  std::uint32_t spins_ = 0;
  std::uint32_t idle_spins_ = 0;
  std::uint32_t busy_spins_ = 0;
};

// The work request opcode of a test's operation; an atomic's comes from its counters.
ibv_wr_opcode opcode_of(bw::Operation operation, const AtomicCounters* atomics);

// What an atomic on a counter that holds `count` adds or compares, and what it swaps in.
struct AtomicOperands {
  std::uint64_t compare_add;
  std::uint64_t swap;
};
AtomicOperands atomic_operands(ibv_wr_opcode opcode, std::uint64_t count);

// A datagram that arrived on `lane`: its size, counted in the tally; none for the client's
// end-of-stream message, which the tally keeps (with what the reply needs) instead.
std::optional<std::uint32_t> take_datagram(const Lane& lane, const ibv_wc& wc, DatagramTally& tally);

}  // namespace rdmakit::loop
