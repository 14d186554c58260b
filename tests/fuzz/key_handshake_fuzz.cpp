// The side channels' key handshake (lib/net/key_handshake): each side decodes what the
// other sent before it knows who that is. The input is one message's bytes, given to all
// three decoders; an answer that decodes is judged by a keyed server and an unkeyed one.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "lib/base/error.hpp"
#include "lib/net/key_handshake.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rdmakit;
  using namespace rdmakit::handshake;
  const std::span<const std::uint8_t> bytes(data, size);
  // Only ProtocolError (AuthenticationError is one) may leave a decoder: the server logs it
  // as the refusal's reason, the client shows it.
  if (const auto hello = fuzz::decoded([&] { return decode_hello(bytes); })) {
    FUZZ_CHECK(size == hello_bytes);
    const auto again = encode(*hello);
    FUZZ_CHECK(std::equal(again.begin(), again.end(), bytes.begin()));
  }
  if (const auto verdict = fuzz::decoded([&] { return decode_verdict(bytes); })) {
    FUZZ_CHECK(size == verdict_bytes);
    const auto again = encode(*verdict);
    FUZZ_CHECK(std::equal(again.begin(), again.end(), bytes.begin()));
    FUZZ_CHECK(!status_text(verdict->status, verdict->service).empty());
  }
  const auto answer = fuzz::decoded([&] { return decode_answer(bytes); });
  if (!answer) return 0;
  FUZZ_CHECK(size == answer_bytes);
  const auto again = encode(*answer);
  FUZZ_CHECK(std::equal(again.begin(), again.end(), bytes.begin()));
  // A fixed server nonce: the fuzzer cannot know it from one input any better than a peer
  // could know a fresh one, so no input it finds may pass a keyed server.
  static const SharedKey key{.bytes = std::vector<std::uint8_t>(32, 0x5a)};
  Hello hello{.service = answer->service, .key_required = true, .nonce = {}};
  hello.nonce.fill(0x11);
  const auto keyed = judge(&key, hello, *answer);
  FUZZ_CHECK(keyed.status != Status::accepted ||
             same_proof(answer->proof, client_proof(key, answer->service, hello.nonce, answer->nonce)));
  FUZZ_CHECK(answer->has_key || keyed.status == Status::client_has_no_key);
  hello.key_required = false;
  const auto open = judge(nullptr, hello, *answer);
  FUZZ_CHECK((open.status == Status::accepted) == !answer->has_key);
  return 0;
}
