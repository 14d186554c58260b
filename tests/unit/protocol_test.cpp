#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <vector>

#include "lib/base/error.hpp"
#include "lib/cm_tools/messages.hpp"
#include "lib/send_bw/bw_messages.hpp"

namespace rdmakit::rping {
namespace {

TEST(Advert, EncodesBigEndian) {
  const auto bytes = encode({.address = 0x0102030405060708ULL, .rkey = 0x0a0b0c0d, .length = 64});
  const unsigned char expected[16] = {1, 2, 3, 4, 5, 6, 7, 8, 0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0, 64};
  EXPECT_EQ(std::memcmp(bytes.data(), expected, sizeof expected), 0);
}

TEST(Advert, RoundTrips) {
  const BufferAdvert advert{.address = 0xffffffffffff1234ULL, .rkey = 0xdeadbeef, .length = 65535};
  EXPECT_EQ(decode_advert(encode(advert)), advert);
}

TEST(Advert, RejectsWrongLengths) {
  std::vector<std::byte> short_message(15), long_message(17), empty;
  EXPECT_THROW(decode_advert(short_message), ProtocolError);
  EXPECT_THROW(decode_advert(long_message), ProtocolError);
  EXPECT_THROW(decode_advert(empty), ProtocolError);
}

TEST(Advert, RejectsPeerAskingBeyondOurBuffer) {
  EXPECT_NO_THROW(check_advert_fits({.address = 1, .rkey = 2, .length = 64}, 64, "read"));
  EXPECT_THROW(check_advert_fits({.address = 1, .rkey = 2, .length = 65}, 64, "read"), ProtocolError);
  EXPECT_THROW(check_advert_fits({.address = 1, .rkey = 2, .length = 0}, 64, "read"), ProtocolError);
  EXPECT_THROW(check_advert_fits({.address = 1, .rkey = 2, .length = 0xffffffff}, 65535, "read"), ProtocolError);
}

TEST(Payload, MatchesStockRpingFirstIteration) {
  std::vector<char> buffer(64);
  fill_ping_payload(buffer, 0);
  // What stock "rping -v" prints for ping 0 with the default 64-byte size.
  EXPECT_STREQ(buffer.data(), "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr");
}

TEST(Payload, PatternStartsOneLetterLaterEachIterationAndWraps) {
  std::vector<char> buffer(40);
  fill_ping_payload(buffer, 1);
  EXPECT_EQ(std::string(buffer.data()).substr(0, 16), "rdma-ping-1: BCD");
  fill_ping_payload(buffer, 57);  // starts at 'z', wraps to 'A'
  EXPECT_EQ(std::string(buffer.data()).substr(0, 17), "rdma-ping-57: zAB");
  fill_ping_payload(buffer, 58);  // the cycle is 58 letters long
  EXPECT_EQ(std::string(buffer.data()).substr(0, 15), "rdma-ping-58: A");
  EXPECT_EQ(buffer.back(), '\0');
}

TEST(Payload, RefusesBuffersBelowMinimum) {
  std::vector<char> buffer(min_payload_size - 1);
  EXPECT_THROW(fill_ping_payload(buffer, 0), std::invalid_argument);
}

TEST(PingEcho, LengthIncludesNulAndNeverExceedsBuffer) {
  const char text[] = "abc\0zzz";
  EXPECT_EQ(echo_length(std::span<const char>(text, 8)), 4u);
  const char unterminated[4] = {'a', 'b', 'c', 'd'};
  EXPECT_EQ(echo_length(std::span<const char>(unterminated, 4)), 4u);
}

}  // namespace
}  // namespace rdmakit::rping

namespace rdmakit::echo {
namespace {

TEST(EchoMessage, RemainingRoundTripsBigEndian) {
  std::array<std::uint8_t, message_size> message{};
  message.fill(0xff);
  encode_remaining(message, 0x01020304);
  EXPECT_EQ(message[0], 0x01);
  EXPECT_EQ(message[3], 0x04);
  EXPECT_EQ(message[4], 0x00) << "the rest is cleared";
  EXPECT_EQ(decode_remaining(message), 0x01020304u);
}

TEST(EchoMessage, StockZerosMeanLastExchange) {
  const std::array<std::uint8_t, message_size> stock{};
  EXPECT_EQ(decode_remaining(stock), 0u);
}

TEST(EchoMessage, OnlyWholeMessagesCount) {
  EXPECT_NO_THROW(check_message_length(message_size));
  // Two bytes would leave half the count as the previous message left it.
  EXPECT_THROW(check_message_length(2), ProtocolError);
  EXPECT_THROW(check_message_length(0), ProtocolError);
  EXPECT_THROW(check_message_length(message_size + 1), ProtocolError);
}

}  // namespace
}  // namespace rdmakit::echo

namespace rdmakit::bw {
namespace {

TEST(BwHello, RoundTripsAndIsBigEndian) {
  const Hello hello{.operation = Operation::write,
                    .test = bw::Test::latency,
                    .max_size = 8u << 20,
                    .depth = 128,
                    .bidirectional = true,
                    .path_mtu = 3,
                    .queue_pairs = 1,
                    .queue_pair_index = 0,
                    .reply_address = 0x00007f0000001000ULL,
                    .reply_rkey = 0x11223344,
                    .reply_length = 8u << 20};
  const auto bytes = encode(hello);
  static_assert(hello_size <= 56, "rdma_connect carries at most 56 bytes over IB CM");
  EXPECT_EQ(bytes[0], 'R');
  EXPECT_EQ(bytes[3], 'W');
  EXPECT_EQ(bytes[4], version);
  EXPECT_EQ(bytes[7], 1);     // latency
  EXPECT_EQ(bytes[9], 0x80);  // 8 MiB = 0x00800000
  EXPECT_EQ(bytes[17], 3);
  EXPECT_EQ(bytes[19], 1);
  EXPECT_EQ(bytes[32], 0x11);
  EXPECT_EQ(decode_hello(bytes), hello);
}

Hello plain_hello() {
  return Hello{.operation = Operation::send, .max_size = 64, .depth = 16};
}

TEST(BwHello, AcceptsCmPaddingAndRejectsForeignData) {
  const auto bytes = encode(plain_hello());
  std::vector<std::uint8_t> padded(bytes.begin(), bytes.end());
  padded.resize(56, 0);  // an IB CM REQ delivers 56 bytes
  EXPECT_EQ(decode_hello(padded).max_size, 64u);

  EXPECT_THROW(decode_hello(std::span(bytes).first(hello_size - 1)), ProtocolError);
  auto foreign = bytes;
  foreign[0] = 'X';
  EXPECT_THROW(decode_hello(foreign), ProtocolError);
  auto future = bytes;
  future[4] = version + 1;
  try {
    decode_hello(future);
    FAIL() << "a newer version was accepted";
  } catch (const ProtocolError& error) {
    EXPECT_NE(std::string(error.what()).find("version 3"), std::string::npos) << error.what();
  }
  auto unknown_operation = bytes;
  unknown_operation[6] = 9;
  EXPECT_THROW(decode_hello(unknown_operation), ProtocolError);
  auto unknown_test = bytes;
  unknown_test[7] = 2;
  EXPECT_THROW(decode_hello(unknown_test), ProtocolError);
  auto unknown_flags = bytes;
  unknown_flags[16] = 0x80;
  EXPECT_THROW(decode_hello(unknown_flags), ProtocolError);
}

TEST(BwHello, RejectsOutOfRangeFields) {
  auto with = [](auto change) {
    auto hello = plain_hello();
    change(hello);
    return encode(hello);
  };
  EXPECT_THROW(decode_hello(with([](Hello& h) { h.max_size = 0; })), ProtocolError);
  EXPECT_THROW(decode_hello(with([](Hello& h) { h.max_size = max_message_size + 1; })), ProtocolError);
  EXPECT_THROW(decode_hello(with([](Hello& h) { h.depth = 0; })), ProtocolError);
  EXPECT_THROW(decode_hello(with([](Hello& h) { h.depth = (1u << 16) + 1; })), ProtocolError);
  EXPECT_THROW(decode_hello(with([](Hello& h) { h.queue_pairs = 0; })), ProtocolError);
  EXPECT_THROW(decode_hello(with([](Hello& h) { h.queue_pairs = max_queue_pairs + 1; })), ProtocolError);
  EXPECT_THROW(decode_hello(with([](Hello& h) { h.queue_pair_index = 1; })), ProtocolError);
  EXPECT_THROW(decode_hello(with([](Hello& h) { h.path_mtu = 6; })), ProtocolError);
  EXPECT_THROW(decode_hello(with([](Hello& h) {
                 h.test = bw::Test::latency;
                 h.queue_pairs = 2;
               })),
               ProtocolError);
  EXPECT_NO_THROW(decode_hello(with([](Hello& h) {
    h.queue_pairs = 4;
    h.queue_pair_index = 3;
  })));
  // Write latency: the server writes its answers into the client's buffer, so it must fit.
  EXPECT_THROW(decode_hello(with([](Hello& h) {
                 h.test = bw::Test::latency;
                 h.operation = Operation::write;
                 h.reply_length = 63;
               })),
               ProtocolError);
  EXPECT_NO_THROW(decode_hello(with([](Hello& h) {
    h.test = bw::Test::latency;
    h.operation = Operation::write;
    h.reply_length = 64;
  })));
  // Atomics: 8 bytes on the server's counter, one way.
  EXPECT_NO_THROW(decode_hello(with([](Hello& h) {
    h.operation = Operation::atomic;
    h.max_size = atomic_size;
  })));
  EXPECT_THROW(decode_hello(with([](Hello& h) {
                 h.operation = Operation::atomic;
                 h.max_size = 16;
               })),
               ProtocolError);
  EXPECT_THROW(decode_hello(with([](Hello& h) {
                 h.operation = Operation::atomic;
                 h.max_size = atomic_size;
                 h.bidirectional = true;
               })),
               ProtocolError);
  auto after_atomic = encode(plain_hello());
  after_atomic[6] = static_cast<std::uint8_t>(Operation::atomic) + 1;
  EXPECT_THROW(decode_hello(after_atomic), ProtocolError);
}

TEST(BwAnswer, RoundTripsAndIsNotAHello) {
  const Answer answer{.address = 0x00007f0012345678ULL, .rkey = 0xdeadbeef, .length = 65536};
  EXPECT_EQ(decode_answer(encode(answer)), answer);
  EXPECT_THROW(decode_hello(encode(answer)), ProtocolError);
  EXPECT_THROW(decode_answer(encode(plain_hello())), ProtocolError);
  EXPECT_THROW(decode_answer(encode(Answer{.address = 1, .rkey = 2, .length = 0})), ProtocolError);
}

TEST(BwRefusal, CarriesAPrintableReason) {
  const auto bytes = encode_refusal("the client asks for 2 GiB\nmessages");
  EXPECT_EQ(decode_refusal(bytes), "the client asks for 2 GiB?messages");
  std::vector<std::uint8_t> padded = bytes;
  padded.resize(148, 0);  // an IB CM REJ delivers 148 bytes
  EXPECT_EQ(decode_refusal(padded), "the client asks for 2 GiB?messages");
  EXPECT_EQ(decode_refusal(encode_refusal(std::string(300, 'x')))->size(), max_refusal_text);
  // A length byte beyond the data is cut to what arrived.
  auto truncated = bytes;
  truncated.resize(10);
  EXPECT_EQ(decode_refusal(truncated), "the");
  EXPECT_EQ(decode_refusal(std::vector<std::uint8_t>(148, 0)), std::nullopt);
  const auto answer = encode(Answer{.address = 1, .rkey = 2, .length = 3});
  EXPECT_EQ(decode_refusal(answer), std::nullopt);
}

TEST(BwHello, DatagramsCarrySendOnly) {
  auto hello = plain_hello();
  hello.datagram = true;
  const auto bytes = encode(hello);
  EXPECT_EQ(bytes[16], 2);
  EXPECT_EQ(decode_hello(bytes), hello);
  auto both = hello;
  both.bidirectional = true;
  EXPECT_EQ(encode(both)[16], 3);
  EXPECT_THROW(decode_hello(encode(both)), ProtocolError);
  auto latency = hello;
  latency.test = bw::Test::latency;
  EXPECT_EQ(decode_hello(encode(latency)), latency);
  auto write = hello;
  write.operation = Operation::write;
  EXPECT_THROW(decode_hello(encode(write)), ProtocolError);
}

TEST(BwHello, ServerIdleWhereNothingComesToAnswer) {
  auto hello = plain_hello();
  for (const auto test : {bw::Test::bandwidth, bw::Test::latency}) {
    hello.test = test;
    hello.operation = Operation::send;
    EXPECT_FALSE(server_idle(hello));
    hello.operation = Operation::read;
    EXPECT_TRUE(server_idle(hello));
    hello.operation = Operation::atomic;
    EXPECT_TRUE(server_idle(hello));
  }
  // A write's latency is answered by watching memory; its bandwidth wants nothing.
  hello.operation = Operation::write;
  hello.test = bw::Test::latency;
  EXPECT_FALSE(server_idle(hello));
  hello.test = bw::Test::bandwidth;
  EXPECT_TRUE(server_idle(hello));
}

TEST(BwDatagramCounts, RoundTripInOneSmallDatagram) {
  const DatagramCounts sent{.kind = DatagramCounts::Kind::sent,
                            .rows = {{.size = 2, .count = 210}, {.size = 1024, .count = (1ull << 40) + 7}}};
  const auto bytes = encode(sent);
  EXPECT_EQ(bytes.size(), 8u + 2 * 12);
  EXPECT_EQ(bytes[5], 4);  // its own kind of message: never read as a hello
  EXPECT_EQ(bytes[6], 0);
  EXPECT_EQ(bytes[7], 2);
  EXPECT_EQ(bytes[11], 2);    // size 2, big-endian
  EXPECT_EQ(bytes[19], 210);  // its count's low byte last
  EXPECT_EQ(bytes[22], 4);    // size 1024
  EXPECT_EQ(bytes[26], 1);    // 2^40
  EXPECT_EQ(bytes[31], 7);
  EXPECT_EQ(decode_datagram_counts(bytes), sent);
  const DatagramCounts done{.kind = DatagramCounts::Kind::done, .rows = {}};
  EXPECT_EQ(decode_datagram_counts(encode(done)), done);

  DatagramCounts full{.kind = DatagramCounts::Kind::received, .rows = {}};
  for (std::uint32_t i = 0; i < max_datagram_rows; ++i) full.rows.push_back({.size = i + 1, .count = i});
  EXPECT_EQ(encode(full).size(), datagram_counts_max_size);
  static_assert(datagram_counts_max_size <= 256, "the counts fit a datagram at the smallest MTU");
  EXPECT_EQ(decode_datagram_counts(encode(full)), full);
  full.rows.push_back({.size = 1000, .count = 1});
  EXPECT_THROW(encode(full), ProtocolError);
}

TEST(BwDatagramCounts, RejectsWhatDoesNotAddUp) {
  const DatagramCounts sent{.kind = DatagramCounts::Kind::sent, .rows = {{.size = 64, .count = 5}}};
  const auto bytes = encode(sent);
  EXPECT_THROW(decode_datagram_counts(std::span(bytes).first(bytes.size() - 1)), ProtocolError);
  EXPECT_THROW(decode_datagram_counts(std::span(bytes).first(7)), ProtocolError);
  auto unknown_kind = bytes;
  unknown_kind[6] = 3;
  EXPECT_THROW(decode_datagram_counts(unknown_kind), ProtocolError);
  auto too_many = bytes;
  too_many[7] = max_datagram_rows + 1;
  EXPECT_THROW(decode_datagram_counts(too_many), ProtocolError);
  auto zero_size = bytes;
  zero_size[11] = 0;
  EXPECT_THROW(decode_datagram_counts(zero_size), ProtocolError);
  const DatagramCounts twice{.kind = DatagramCounts::Kind::sent,
                             .rows = {{.size = 64, .count = 5}, {.size = 64, .count = 6}}};
  EXPECT_THROW(decode_datagram_counts(encode(twice)), ProtocolError);
  auto hello = encode(plain_hello());
  EXPECT_THROW(decode_datagram_counts(hello), ProtocolError);
  // What arrives in a receive buffer may run past the message: the count of rows decides.
  std::vector<std::uint8_t> padded(bytes.begin(), bytes.end());
  padded.resize(200, 0xff);
  EXPECT_EQ(decode_datagram_counts(padded), sent);
}

// iWARP carries no immediate data: the size travels in a message of its own, which a ping
// (any other length, or no marker) is never taken for.
TEST(SizeMessage, RoundTripsAndIsToldFromAPing) {
  const auto message = encode_size_message(2);
  EXPECT_EQ(message, (std::array<std::uint8_t, size_message_bytes>{'R', 'K', 'S', 'Z', 0, 0, 0, 2}));
  EXPECT_EQ(decode_size_message(message, 8), 2U);
  EXPECT_EQ(decode_size_message(encode_size_message(65536), 65536), 65536U);
  const std::array<std::uint8_t, 8> ping{};
  EXPECT_FALSE(decode_size_message(ping, 8));
  EXPECT_FALSE(decode_size_message(std::span(message).first(7), 8));
  EXPECT_THROW(decode_size_message(encode_size_message(9), 8), ProtocolError);
  EXPECT_THROW(decode_size_message(encode_size_message(0), 8), ProtocolError);
}

// iWARP SEND streams go on credits: the server's running total of receives reposted.
TEST(CreditMessage, RoundTripsAndIsNoSizeMessage) {
  const auto message = encode_credit_message(0x01020304);
  EXPECT_EQ(message, (std::array<std::uint8_t, credit_message_bytes>{'R', 'K', 'C', 'R', 1, 2, 3, 4}));
  EXPECT_EQ(decode_credit_message(message), 0x01020304U);
  EXPECT_FALSE(decode_size_message(message, 1U << 30));
  EXPECT_FALSE(decode_credit_message(encode_size_message(64)));
  EXPECT_FALSE(decode_credit_message(std::span(message).first(7)));
}

}  // namespace
}  // namespace rdmakit::bw
