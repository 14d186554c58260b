#pragma once
// The one way to wait for completions, as fabtests' ft_read_cq: busy polling, or completion
// events (the tools' -e), where an idle caller arms its CQs, polls them once more and then
// sleeps in one poll() on the CQs' completion channels, the CM event channels and the stop
// signal together, until one of them fires or the silence bound's deadline passes. The
// caller polls its CQs itself (the measured loops inline their ibv_poll_cq); this class owns
// the arming, the sleep and taking the events. Only here are ibv_req_notify_cq and
// ibv_get_cq_event called.

#include <infiniband/verbs.h>

#include <poll.h>

#include <cstdint>
#include <span>
#include <vector>

#include "lib/base/wait.hpp"

namespace rdmakit {

enum class CompletionMode : std::uint8_t { busy_poll, events };

// -e asks for events; a loop that watches memory for its answer rather than its CQ (the
// write latency test) busy-polls whatever -e says.
CompletionMode choose_completion_mode(bool events, bool watches_memory = false) noexcept;

// What ended a sleep, by priority when several fired at once.
enum class Woken : std::uint8_t { completion, cm_event, stopped, timed_out };

// The descriptors one sleep polls: the completion channels (each once), then the CM event
// channels, then the stop signal; and what their revents mean. Pure, for the unit tests.
class PollSet {
 public:
  // Adds `fd` as a completion channel unless it is one already; its place in fds().
  std::size_t add_channel(int fd);
  void add_cm(int fd);
  void remove_cm(int fd);
  void set_stop(int fd);  // -1: none
  std::size_t channels() const noexcept { return channels_; }
  std::vector<pollfd>& fds() noexcept { return fds_; }
  const std::vector<pollfd>& fds() const noexcept { return fds_; }
  // After poll() returned `ready` (0: the timeout passed).
  Woken woken(int ready) const noexcept;

 private:
  std::vector<pollfd> fds_;
  std::size_t channels_ = 0;
  std::size_t cms_ = 0;
};

class CqWaiter {
 public:
  // `stop_fd` (-1: none) ends a sleep (Ctrl-C). Busy polling never sleeps: the caller
  // spins and looks at the clock and the stop signal itself.
  CqWaiter(CompletionMode mode, int stop_fd);
  // With the CQs (each with a completion channel, made non-blocking here, in events mode)
  // and CM event channels to watch from the start.
  CqWaiter(CompletionMode mode, std::span<ibv_cq* const> cqs, std::span<const int> cm_fds, int stop_fd);

  CompletionMode mode() const noexcept { return mode_; }
  bool sleeps() const noexcept { return mode_ == CompletionMode::events; }
  // Watches another CQ (a connection made later); it starts unarmed.
  void watch(ibv_cq* cq);
  // Watches a CM event channel's descriptor, or stops watching it (rdma_migrate_id).
  void watch_cm(int fd) { set_.add_cm(fd); }
  void forget_cm(int fd) { set_.remove_cm(fd); }

  // True once every watched CQ is armed. An idle caller arms, then polls its CQs once more
  // before sleep(): a completion that arrives between the last poll and the arming raises
  // no event.
  bool armed() const noexcept;
  void arm();
  // One poll() until a completion event, a CM event, the stop signal or `until`; takes and
  // acknowledges the completion events, leaving their CQs to be armed again.
  Woken sleep(Clock::time_point until);

 private:
  void take_events(std::size_t channel);

  struct Watched {
    ibv_cq* cq;
    bool armed = false;
  };
  CompletionMode mode_;
  std::vector<Watched> cqs_;
  std::vector<ibv_comp_channel*> channels_;  // in the order of the poll set's channels
  PollSet set_;
};

}  // namespace rdmakit
