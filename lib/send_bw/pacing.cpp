#include "lib/send_bw/pacing.hpp"

#include <limits>

#include <fmt/format.h>

#include "lib/base/error.hpp"

namespace rdmakit {

std::uint32_t signal_interval(std::uint32_t depth) {
  return std::clamp<std::uint32_t>(depth / 2, 1, 64);
}

StreamLedger::StreamLedger(std::size_t lanes, const Budget& budget, SignalSchedule schedule, bool bidirectional,
                           Clock::time_point started)
    : lanes_(lanes),
      schedule_(schedule),
      bidirectional_(bidirectional),
      open_ended_(budget.duration.has_value()),
      started_(started),
      ends_(started + budget.duration.value_or(std::chrono::nanoseconds::zero())),
      last_completion_(started),
      // Peak: the best rate over a window of at least one signalling interval per lane.
      peak_(std::uint64_t{schedule.every()} * lanes, started) {
  for (auto& p : lanes_) p.target = budget.duration ? std::numeric_limits<std::uint64_t>::max() : budget.iterations;
}

std::uint64_t StreamLedger::completed() const {
  std::uint64_t completed = 0;
  for (const auto& p : lanes_) completed += p.completed;
  return completed;
}

BandwidthRow StreamLedger::row(std::uint32_t size) const {
  std::uint64_t messages = 0;
  for (const auto& p : lanes_) messages += std::min(p.completed, p.target) + (bidirectional_ ? p.received : 0);
  return bandwidth_row(size, messages, last_completion_ - started_, peak_.fastest(), peak_.fastest_messages());
}

void SinkLedger::arrived(std::size_t lane, std::uint32_t size, Clock::time_point now) {
  auto [run, fresh] = runs_.try_emplace(size, Run{.messages = 0, .first = now, .last = now});
  ++run->second.messages;
  run->second.last = now;
  if (!reflect_) return;
  Lane& r = lanes_[lane];
  if (r.owed > 0 && r.owed_size != size) {
    throw ProtocolError(
        fmt::format("the client moved to {}-byte messages with {} {}-byte ones unanswered", size, r.owed, r.owed_size));
  }
  r.owed_size = size;
  ++r.owed;
}

void SinkLedger::close_runs(std::vector<BandwidthRow>& rows) {
  for (const auto& [size, run] : runs_) {
    // From the first arrival to the last: the first message's own transfer is not timed.
    rows.push_back(bandwidth_row(size, run.messages, run.last - run.first, {}, 0));
  }
  runs_.clear();
}

}  // namespace rdmakit
