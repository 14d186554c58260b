// send_bw's client decodes the server's Answer (the buffer it will RDMA WRITE or READ)
// from the CM accept's private data, padded by the CM. The input is the private data.

#include <algorithm>
#include <array>
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
  const auto decoded = fuzz::decoded([&] { return bw::decode_answer(bytes); });
  if (!decoded) return 0;
  const auto& answer = *decoded;

  FUZZ_CHECK(size >= bw::answer_size);
  // The client moves at most max_message_size bytes into this buffer per request.
  FUZZ_CHECK(answer.length >= 1 && answer.length <= bw::max_message_size);

  // Bytes 6-7 are reserved (ignored, sent as zeros); the CM's padding is ignored.
  std::array<std::uint8_t, bw::answer_size> meaningful{};
  std::copy_n(bytes.begin(), bw::answer_size, meaningful.begin());
  meaningful[6] = meaningful[7] = 0;
  const auto again = bw::encode(answer);
  FUZZ_CHECK(again == meaningful);
  FUZZ_CHECK(bw::decode_answer(again) == answer);
  FUZZ_CHECK(bw::decode_answer(bytes.first(bw::answer_size)) == answer);
  FUZZ_CHECK(!fuzz::accepts([&] { bw::decode_answer(bytes.first(bw::answer_size - 1)); }));
  FUZZ_CHECK(!fuzz::accepts([&] { bw::decode_hello(bytes); }));
  FUZZ_CHECK(!decode_refusal(bytes).has_value());
  return 0;
}
