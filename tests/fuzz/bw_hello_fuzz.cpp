// send_bw's server decodes the client's Hello from the CM REQ private data (padded by the
// CM, so longer than 40 bytes) and sizes its buffers, queues and queue pairs from it.
// The input is the private data.

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
  // Anything but ProtocolError escaping a decoder is a crash for libFuzzer: send_bw
  // reports only that one as "the peer sent something wrong".
  const auto decoded = fuzz::decoded([&] { return bw::decode_hello(bytes); });
  if (!decoded) return 0;
  const auto& hello = *decoded;

  FUZZ_CHECK(size >= bw::hello_size);
  FUZZ_CHECK(hello.operation == bw::Operation::send || hello.operation == bw::Operation::write ||
             hello.operation == bw::Operation::read || hello.operation == bw::Operation::atomic);
  // An atomic lands 8 bytes in the server's buffer, never more, never both ways.
  if (hello.operation == bw::Operation::atomic) {
    FUZZ_CHECK(hello.max_size == bw::atomic_size && !hello.bidirectional);
  }
  FUZZ_CHECK(hello.test == bw::Test::bandwidth || hello.test == bw::Test::latency);
  FUZZ_CHECK(hello.max_size >= 1 && hello.max_size <= bw::max_message_size);
  FUZZ_CHECK(hello.depth >= 1 && hello.depth <= 65536);
  FUZZ_CHECK(hello.queue_pairs >= 1 && hello.queue_pairs <= bw::max_queue_pairs);
  FUZZ_CHECK(hello.queue_pair_index < hello.queue_pairs);
  FUZZ_CHECK(hello.path_mtu <= 5);
  if (hello.test == bw::Test::latency) {
    FUZZ_CHECK(hello.queue_pairs == 1);
    // The server's answering RDMA WRITE of max_size bytes must land inside the client's buffer.
    if (hello.operation == bw::Operation::write) FUZZ_CHECK(hello.reply_length >= hello.max_size);
  }

  // Exactly the first 40 bytes are the message, bytes 22-23 reserved (ignored, sent as
  // zeros); the CM's padding is ignored.
  std::array<std::uint8_t, bw::hello_size> meaningful{};
  std::copy_n(bytes.begin(), bw::hello_size, meaningful.begin());
  meaningful[22] = meaningful[23] = 0;
  const auto again = bw::encode(hello);
  FUZZ_CHECK(again == meaningful);
  FUZZ_CHECK(bw::decode_hello(again) == hello);
  FUZZ_CHECK(bw::decode_hello(bytes.first(bw::hello_size)) == hello);
  bool truncated_accepted = true;
  try {
    bw::decode_hello(bytes.first(bw::hello_size - 1));
  } catch (const ProtocolError&) {
    truncated_accepted = false;
  }
  FUZZ_CHECK(!truncated_accepted);

  // Message kinds never alias: a Hello is neither an Answer nor a Refusal.
  bool answer_accepted = true;
  try {
    bw::decode_answer(bytes);
  } catch (const ProtocolError&) {
    answer_accepted = false;
  }
  FUZZ_CHECK(!answer_accepted);
  FUZZ_CHECK(!decode_refusal(bytes).has_value());
  FUZZ_CHECK(!bw::to_string(hello.operation).empty() && bw::to_string(hello.operation) != "unknown");
  return 0;
}
