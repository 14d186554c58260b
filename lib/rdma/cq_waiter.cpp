#include "lib/rdma/cq_waiter.hpp"

#include <algorithm>
#include <cerrno>
#include <stdexcept>

#include "lib/base/error.hpp"

namespace rdmakit {

CompletionMode choose_completion_mode(bool events, bool watches_memory) noexcept {
  return events && !watches_memory ? CompletionMode::events : CompletionMode::busy_poll;
}

std::size_t PollSet::add_channel(int fd) {
  const auto end = fds_.begin() + static_cast<std::ptrdiff_t>(channels_);
  const auto found = std::find_if(fds_.begin(), end, [fd](const pollfd& p) { return p.fd == fd; });
  if (found != end) return static_cast<std::size_t>(found - fds_.begin());
  fds_.insert(end, pollfd{.fd = fd, .events = POLLIN, .revents = 0});
  return channels_++;
}

void PollSet::add_cm(int fd) {
  fds_.insert(fds_.begin() + static_cast<std::ptrdiff_t>(channels_ + cms_),
              pollfd{.fd = fd, .events = POLLIN, .revents = 0});
  ++cms_;
}

void PollSet::remove_cm(int fd) {
  const auto first = fds_.begin() + static_cast<std::ptrdiff_t>(channels_);
  const auto last = first + static_cast<std::ptrdiff_t>(cms_);
  const auto found = std::find_if(first, last, [fd](const pollfd& p) { return p.fd == fd; });
  if (found == last) return;
  fds_.erase(found);
  --cms_;
}

void PollSet::set_stop(int fd) {
  const bool has_stop = fds_.size() > channels_ + cms_;
  if (has_stop) fds_.pop_back();
  if (fd >= 0) fds_.push_back(pollfd{.fd = fd, .events = POLLIN, .revents = 0});
}

Woken PollSet::woken(int ready) const noexcept {
  if (ready <= 0) return Woken::timed_out;
  auto fired = [this](std::size_t from, std::size_t to) {
    return std::any_of(fds_.begin() + static_cast<std::ptrdiff_t>(from), fds_.begin() + static_cast<std::ptrdiff_t>(to),
                       [](const pollfd& p) { return p.revents != 0; });
  };
  if (fired(0, channels_)) return Woken::completion;
  if (fired(channels_, channels_ + cms_)) return Woken::cm_event;
  if (fired(channels_ + cms_, fds_.size())) return Woken::stopped;
  return Woken::timed_out;
}

CqWaiter::CqWaiter(CompletionMode mode, int stop_fd) : mode_(mode) {
  set_.set_stop(stop_fd);
}

CqWaiter::CqWaiter(CompletionMode mode, std::span<ibv_cq* const> cqs, std::span<const int> cm_fds, int stop_fd)
    : CqWaiter(mode, stop_fd) {
  for (ibv_cq* cq : cqs) watch(cq);
  for (const int fd : cm_fds) watch_cm(fd);
}

void CqWaiter::watch(ibv_cq* cq) {
  if (!sleeps()) return;
  if (cq->channel == nullptr) throw std::logic_error("completion events need a CQ with a completion channel");
  cqs_.push_back(Watched{.cq = cq});
  if (std::find(channels_.begin(), channels_.end(), cq->channel) != channels_.end()) return;
  // Non-blocking: take_events() reads until the channel is empty.
  set_nonblocking(cq->channel->fd, "completion channel");
  channels_.push_back(cq->channel);
  set_.add_channel(cq->channel->fd);
}

bool CqWaiter::armed() const noexcept {
  return std::all_of(cqs_.begin(), cqs_.end(), [](const Watched& w) { return w.armed; });
}

void CqWaiter::arm() {
  for (auto& watched : cqs_) {
    if (watched.armed) continue;
    check_returned(ibv_req_notify_cq(watched.cq, 0), "ibv_req_notify_cq", "");
    watched.armed = true;
  }
}

Woken CqWaiter::sleep(Clock::time_point until) {
  auto& fds = set_.fds();
  for (auto& p : fds) p.revents = 0;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
  // A far deadline ("forever") is slept in one-hour polls rather than overflowing int.
  const int timeout_ms = static_cast<int>(std::clamp<long long>(left.count(), 0, 3'600'000));
  const int ready = poll(fds.data(), fds.size(), timeout_ms);
  if (ready < 0 && errno != EINTR) throw RdmaError("poll", "completion and CM channels", errno);
  for (std::size_t i = 0; i < set_.channels(); ++i) {
    if ((fds[i].revents & POLLIN) != 0) take_events(i);
  }
  const auto woken = set_.woken(ready);
  // A poll cut short (EINTR, or an hour of a far deadline) is no timeout until `until`.
  if (woken == Woken::timed_out && Clock::now() < until) return Woken::completion;
  return woken;
}

void CqWaiter::take_events(std::size_t channel) {
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  while (ibv_get_cq_event(channels_[channel], &cq, &context) == 0) {
    ibv_ack_cq_events(cq, 1);
    for (auto& watched : cqs_) {
      if (watched.cq == cq) watched.armed = false;
    }
  }
  if (errno != EAGAIN && errno != EWOULDBLOCK) throw RdmaError("ibv_get_cq_event", "", errno);
}

}  // namespace rdmakit
