// A perftest peer's messages over the out-of-band TCP socket (lib/send_bw/perftest_exchange):
// the input is one message, given to every decoder that could be waiting for it. Each either
// refuses it with ProtocolError or returns what our encoder writes back to the same value.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_support.hpp"
#include "lib/base/error.hpp"
#include "lib/send_bw/perftest_exchange.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rdmakit::bw;
  const std::span<const std::uint8_t> bytes(data, size);

  if (const auto version = rdmakit::fuzz::decoded([&] { return perftest::decode_version(bytes); })) {
    FUZZ_CHECK(size == perftest::version_size && version->number >= 5.7);
    FUZZ_CHECK(!version->text.empty() && version->text.size() < perftest::version_size);
    FUZZ_CHECK(perftest::decode_version(perftest::encode_version(version->text)) == *version);
  }
  if (const auto page = rdmakit::fuzz::decoded([&] { return perftest::decode_page_size(bytes); })) {
    FUZZ_CHECK(*page >= 4096 && *page <= 65536 && (*page & (*page - 1)) == 0);
  }
  if (const auto line = rdmakit::fuzz::decoded([&] { return perftest::decode_cache_line(bytes); })) {
    FUZZ_CHECK(*line >= 16 && *line <= 512 && (*line & (*line - 1)) == 0);
  }
  if (const auto mtu = rdmakit::fuzz::decoded([&] { return perftest::decode_mtu(bytes); })) {
    FUZZ_CHECK(*mtu >= 1 && *mtu <= 5);
    FUZZ_CHECK(perftest::encode_mtu(*mtu)[0] == bytes[0]);
  }
  for (const bool with_gid : {false, true}) {
    const auto record = rdmakit::fuzz::decoded([&] { return perftest::decode_destination(bytes, with_gid); });
    if (!record) continue;
    FUZZ_CHECK(size == (with_gid ? perftest::record_size_with_gid : perftest::record_size));
    FUZZ_CHECK(record->qpn <= 0xffffff && record->psn <= 0xffffff);
    FUZZ_CHECK(record->gid.has_value() == with_gid);
    const auto again = perftest::encode(*record);
    FUZZ_CHECK(again.size() == size);
    FUZZ_CHECK(perftest::decode_destination(again, with_gid) == *record);
  }
  if (size == perftest::results_field_size * perftest::results_fields) {
    std::array<std::array<std::uint8_t, perftest::results_field_size>, perftest::results_fields> fields{};
    for (std::size_t i = 0; i < fields.size(); ++i) {
      std::copy_n(bytes.begin() + static_cast<std::ptrdiff_t>(i * perftest::results_field_size),
                  perftest::results_field_size, fields[i].begin());
    }
    if (const auto results = rdmakit::fuzz::decoded([&] { return perftest::decode_results(fields); })) {
      FUZZ_CHECK(results->average_mb_per_s >= 0.0 && results->peak_mb_per_s >= 0.0);
      FUZZ_CHECK(perftest::encode(*results) == fields);
    }
  }
  return 0;
}
