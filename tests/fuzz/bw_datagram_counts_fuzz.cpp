// send_bw -c UD: each side decodes the other's counts at the end of a datagram stream from a
// receive buffer (its bytes after the GRH, padded by whatever the buffer held). The input is
// those bytes.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "fuzz_support.hpp"
#include "lib/base/error.hpp"
#include "lib/send_bw/bw_messages.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rdmakit;
  const std::span<const std::uint8_t> bytes(data, size);
  const auto decoded = fuzz::decoded([&] { return bw::decode_datagram_counts(bytes); });
  if (!decoded) return 0;
  const auto& counts = *decoded;

  // What the loss figures and the rows rely on: few rows, sizes in range, each once.
  FUZZ_CHECK(counts.rows.size() <= bw::max_datagram_rows);
  for (std::size_t i = 0; i < counts.rows.size(); ++i) {
    FUZZ_CHECK(counts.rows[i].size >= 1 && counts.rows[i].size <= bw::max_message_size);
    for (std::size_t j = 0; j < i; ++j) FUZZ_CHECK(counts.rows[j].size != counts.rows[i].size);
  }

  // An accepted message re-encodes to its own bytes (what follows them is ignored), and
  // fits one datagram at the smallest MTU.
  const auto again = bw::encode(counts);
  FUZZ_CHECK(again.size() <= bw::datagram_counts_max_size && again.size() <= size);
  FUZZ_CHECK(std::equal(again.begin(), again.end(), bytes.begin()));
  FUZZ_CHECK(bw::decode_datagram_counts(again) == counts);
  FUZZ_CHECK(!fuzz::accepts([&] { bw::decode_datagram_counts(bytes.first(again.size() - 1)); }));
  FUZZ_CHECK(!fuzz::accepts([&] { bw::decode_hello(bytes); }));
  return 0;
}
