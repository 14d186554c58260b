#include "lib/rdma/completion_clock.hpp"

#include <cmath>

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

std::uint64_t measured_core_clock_khz(CounterSample first, CounterSample second, std::uint64_t mask) {
  if (second.host_ns <= first.host_ns) return 0;
  const std::uint64_t ticks = (second.ticks - first.ticks) & mask;
  const std::uint64_t elapsed_ns = second.host_ns - first.host_ns;
  // ticks / (ns / 10^6) in kHz, in long double: ticks times 10^6 may not fit in 64 bits.
  return static_cast<std::uint64_t>(
      std::llround(static_cast<long double>(ticks) * 1e6L / static_cast<long double>(elapsed_ns)));
}

std::uint64_t believed_core_clock_khz(std::uint64_t nominal_khz, std::uint64_t measured_khz) {
  if (measured_khz == 0) return nominal_khz;
  if (nominal_khz == 0) return measured_khz;
  const double ratio = static_cast<double>(measured_khz) / static_cast<double>(nominal_khz);
  return ratio > 1.0 + trusted_core_clock_error || ratio < 1.0 - trusted_core_clock_error ? measured_khz : nominal_khz;
}

}  // namespace rdmakit
