#pragma once
// The clock a completion carries. Where the provider turns its stamps into nanoseconds
// (ibv_wc_read_completion_wallclock_ns: mlx5, from the clock the kernel keeps in step with the
// device, or its real-time mode's own stamps) they are taken as such; otherwise the raw stamp
// (ibv_wc_read_completion_ts) counts the device's core clock, as wide as ibv_query_device_ex's
// completion_timestamp_mask and ticking hca_core_clock kHz, which is checked against the
// device's own counter (ibv_query_rt_values_ex) over a few milliseconds. Two stamps of one
// device are compared as a difference modulo the counter's width, so a wrap between them is
// no jump; stamps of two devices never are.

#include <cstdint>
#include <optional>

namespace rdmakit {

struct CompletionClock {
  std::uint64_t mask = 0;          // the counter's bits (ones), from completion_timestamp_mask
  std::uint64_t ticks_per_ms = 0;  // hca_core_clock: kHz, ticks a millisecond

  // A device that reports neither stamps none.
  static std::optional<CompletionClock> of_device(std::uint64_t timestamp_mask, std::uint64_t core_clock_khz);
  // Stamps already in nanoseconds: the provider's wall-clock stamps, or host time taken at
  // poll (the stand-in for a device without stamps, with which the exchange of device times
  // runs, and is tested, on any device).
  static CompletionClock nanoseconds() { return {.mask = ~std::uint64_t{0}, .ticks_per_ms = 1'000'000}; }

  // Nanoseconds from the stamp `from` to the later stamp `to` (modulo the counter: a `to`
  // that looks earlier has wrapped).
  std::uint64_t ns_between(std::uint64_t from, std::uint64_t to) const;
};

// Two readings of the device's counter (ibv_query_rt_values_ex) and the host's monotonic
// clock around each.
struct CounterSample {
  std::uint64_t host_ns = 0;
  std::uint64_t ticks = 0;
};

// The core clock the counter kept between two samples, in kHz (modulo the counter's width);
// 0 when the samples say nothing (no host time between them).
std::uint64_t measured_core_clock_khz(CounterSample first, CounterSample second, std::uint64_t mask);

// How far a measured rate may stray from the nominal one before it is believed instead: the
// samples' own error is a few microseconds of system-call jitter over milliseconds (0.1%);
// a nominal value that is wrong is wrong by far more (a real-time-format stamp, a firmware
// that reports another clock).
inline constexpr double trusted_core_clock_error = 0.01;

// The core clock to use: the nominal hca_core_clock unless the measured one (non-zero) differs
// from it by more than trusted_core_clock_error.
std::uint64_t believed_core_clock_khz(std::uint64_t nominal_khz, std::uint64_t measured_khz);

}  // namespace rdmakit
