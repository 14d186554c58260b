#include "lib/measure/completion_clock.hpp"

namespace rdmakit {

std::optional<CompletionClock> CompletionClock::of_device(std::uint64_t timestamp_mask, std::uint64_t core_clock_khz) {
  if (timestamp_mask == 0 || core_clock_khz == 0) return std::nullopt;
  return CompletionClock{.mask = timestamp_mask, .ticks_per_ms = core_clock_khz};
}

std::uint64_t CompletionClock::ns_between(std::uint64_t from, std::uint64_t to) const {
  const std::uint64_t ticks = (to - from) & mask;
  // Whole milliseconds and the rest apart: a tick count times 10^6 would not fit in 64 bits.
  return ticks / ticks_per_ms * 1'000'000U + ticks % ticks_per_ms * 1'000'000U / ticks_per_ms;
}

}  // namespace rdmakit
