#pragma once
// The clock a completion carries (ibv_wc_read_completion_ts): a free-running counter of the
// device's core clock, as wide as ibv_query_device_ex's completion_timestamp_mask and ticking
// hca_core_clock kHz. Two stamps of one device are compared as a difference modulo the
// counter's width, so a wrap between them is no jump; stamps of two devices never are.

#include <cstdint>
#include <optional>

namespace rdmakit {

struct CompletionClock {
  std::uint64_t mask = 0;          // the counter's bits (ones), from completion_timestamp_mask
  std::uint64_t ticks_per_ms = 0;  // hca_core_clock: kHz, ticks a millisecond

  // A device that reports neither stamps none.
  static std::optional<CompletionClock> of_device(std::uint64_t timestamp_mask, std::uint64_t core_clock_khz);
  // Host time taken at poll, in ns: the stand-in for a device without stamps, with which
  // the exchange of device times runs (and is tested) on any device.
  static CompletionClock host_nanoseconds() { return {.mask = ~std::uint64_t{0}, .ticks_per_ms = 1'000'000}; }

  // Nanoseconds from the stamp `from` to the later stamp `to` (modulo the counter: a `to`
  // that looks earlier has wrapped).
  std::uint64_t ns_between(std::uint64_t from, std::uint64_t to) const;
};

}  // namespace rdmakit
