// rping's control messages, as the server and the client receive them: the peer's buffer
// advert (must be exactly 16 bytes, may ask for nothing or for more than we hold), and the
// bytes the server echoes back from a stock client's ping (NUL-terminated, or not at all).
// The input is the received message itself.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "fuzz_support.hpp"
#include "lib/base/error.hpp"
#include "lib/cm_tools/messages.hpp"

namespace {

using namespace rdmakit;

void check_advert(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> message(reinterpret_cast<const std::byte*>(data), size);
  const auto advert = fuzz::decoded([&] { return rping::decode_advert(message); });
  FUZZ_CHECK(advert.has_value() == (size == rping::advert_wire_size));
  if (!advert) return;
  const auto again = rping::encode(*advert);
  FUZZ_CHECK(std::memcmp(again.data(), data, size) == 0);
  FUZZ_CHECK(rping::decode_advert(again) == *advert);

  // The server RDMA-READs / -WRITEs advert.length bytes of its own buffer: accepting a length
  // of 0 or one beyond the capacity would move nothing or overrun the registration.
  const std::size_t length = advert->length;
  const std::size_t capacities[] = {0,
                                    1,
                                    rping::min_payload_size,
                                    rping::default_payload_size,
                                    rping::max_payload_size,
                                    length == 0 ? 0 : length - 1,
                                    length,
                                    length + 1,
                                    std::numeric_limits<std::size_t>::max()};
  for (const auto capacity : capacities) {
    const bool fits = fuzz::accepts([&] { rping::check_advert_fits(*advert, capacity, "fuzzing"); });
    FUZZ_CHECK(fits == (length >= 1 && length <= capacity));
  }
}

void check_echo(const std::uint8_t* data, std::size_t size) {
  const auto echoed = rping::echo_length({reinterpret_cast<const char*>(data), size});
  const auto* nul = static_cast<const std::uint8_t*>(size == 0 ? nullptr : std::memchr(data, 0, size));
  FUZZ_CHECK(echoed <= size);
  FUZZ_CHECK(echoed == (nul != nullptr ? static_cast<std::size_t>(nul - data) + 1 : size));
}

// What a stock client sends and the server echoes: for every size rping accepts, the
// payload holds no NUL before its last byte, so the echo is the whole buffer.
void check_payload(const std::uint8_t* data, std::size_t size) {
  if (size < 10) return;
  std::uint64_t iteration = 0;
  std::memcpy(&iteration, data, sizeof iteration);
  const auto span = rping::max_payload_size - rping::min_payload_size + 1;
  const auto length = rping::min_payload_size + static_cast<std::uint32_t>((data[8] << 8 | data[9]) % span);
  std::vector<char> buffer(length);
  rping::fill_ping_payload(buffer, iteration);
  FUZZ_CHECK(std::memcmp(buffer.data(), "rdma-ping-", 10) == 0);
  FUZZ_CHECK(buffer.back() == '\0');
  FUZZ_CHECK(rping::echo_length(buffer) == buffer.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check_advert(data, size);
  check_echo(data, size);
  check_payload(data, size);
  return 0;
}
