// send_bw's client turns a CM reject's private data into the reason it prints: from our
// server a Refusal, from anything else arbitrary bytes (or none). The text reaches the
// terminal and the JSON report, so it must be short and printable. The input is the
// private data, and also a reason a server might refuse with.

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "fuzz_support.hpp"
#include "lib/rdma/refusal.hpp"

namespace {

bool printable(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return std::isprint(static_cast<unsigned char>(c)) != 0; });
}

// What the client should show for the text bytes it got: printable ones as they are.
std::string shown(std::span<const std::uint8_t> text) {
  std::string out;
  for (const auto byte : text) out += std::isprint(byte) != 0 ? static_cast<char>(byte) : '?';
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rdmakit;
  const std::span<const std::uint8_t> bytes(data, size);

  if (const auto text = decode_refusal(bytes)) {
    FUZZ_CHECK(size >= 7);
    FUZZ_CHECK(text->size() <= max_refusal_text);
    FUZZ_CHECK(text->size() <= size - 7 && text->size() <= bytes[6]);
    FUZZ_CHECK(printable(*text));
    FUZZ_CHECK(*text == shown(bytes.subspan(7, text->size())));
    // Re-sent by a server, the shown text survives unchanged.
    FUZZ_CHECK(decode_refusal(encode_refusal(*text)) == *text);
  } else {
    FUZZ_CHECK(size < 7 || bytes[0] != 0x52 || bytes[1] != 0x4b || bytes[2] != 0x42 || bytes[3] != 0x57 ||
               bytes[5] != 3);
  }

  // The input as a server's reason: cut to max_refusal_text, within the 148 bytes an IB CM
  // REJ carries, and shown as sent where printable.
  const auto reason = fuzz::as_text(data, size);
  const auto encoded = encode_refusal(reason);
  const auto kept = std::min(size, max_refusal_text);
  FUZZ_CHECK(encoded.size() == 7 + kept && encoded.size() <= 148);
  const auto decoded = decode_refusal(encoded);
  FUZZ_CHECK(decoded.has_value() && *decoded == shown(bytes.first(kept)));
  return 0;
}
