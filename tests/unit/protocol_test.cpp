#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "lib/error.hpp"
#include "lib/protocol.hpp"

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

TEST(Echo, LengthIncludesNulAndNeverExceedsBuffer) {
  const char text[] = "abc\0zzz";
  EXPECT_EQ(echo_length(std::span<const char>(text, 8)), 4u);
  const char unterminated[4] = {'a', 'b', 'c', 'd'};
  EXPECT_EQ(echo_length(std::span<const char>(unterminated, 4)), 4u);
}

}  // namespace
}  // namespace rdmakit::rping

namespace rdmakit::rdmx {
namespace {

TEST(RdmxMessage, RemainingRoundTripsBigEndian) {
  std::array<std::uint8_t, message_size> message{};
  message.fill(0xff);
  encode_remaining(message, 0x01020304);
  EXPECT_EQ(message[0], 0x01);
  EXPECT_EQ(message[3], 0x04);
  EXPECT_EQ(message[4], 0x00) << "the rest is cleared";
  EXPECT_EQ(decode_remaining(message), 0x01020304u);
}

TEST(RdmxMessage, StockZerosMeanLastExchange) {
  const std::array<std::uint8_t, message_size> stock{};
  EXPECT_EQ(decode_remaining(stock), 0u);
}

}  // namespace
}  // namespace rdmakit::rdmx

namespace rdmakit::bw {
namespace {

TEST(BwHello, RoundTripsAndIsBigEndian) {
  const Hello hello{.operation = Operation::write, .max_size = 8u << 20, .depth = 128};
  const auto bytes = encode(hello);
  EXPECT_EQ(bytes[0], 'R');
  EXPECT_EQ(bytes[3], 'W');
  EXPECT_EQ(bytes[4], version);
  EXPECT_EQ(bytes[9], 0x80);  // 8 MiB = 0x00800000
  EXPECT_EQ(decode_hello(bytes), hello);
}

TEST(BwHello, AcceptsCmPaddingAndRejectsForeignData) {
  const auto bytes = encode(Hello{.operation = Operation::send, .max_size = 64, .depth = 16});
  std::vector<std::uint8_t> padded(bytes.begin(), bytes.end());
  padded.resize(56, 0);  // an IB CM REQ delivers 56 bytes
  EXPECT_EQ(decode_hello(padded).max_size, 64u);

  EXPECT_THROW(decode_hello(std::span(bytes).first(23)), ProtocolError);
  auto foreign = bytes;
  foreign[0] = 'X';
  EXPECT_THROW(decode_hello(foreign), ProtocolError);
  auto future = bytes;
  future[4] = version + 1;
  try {
    decode_hello(future);
    FAIL() << "a newer version was accepted";
  } catch (const ProtocolError& error) {
    EXPECT_NE(std::string(error.what()).find("version 2"), std::string::npos) << error.what();
  }
  auto unknown_operation = bytes;
  unknown_operation[6] = 9;
  EXPECT_THROW(decode_hello(unknown_operation), ProtocolError);
  EXPECT_THROW(decode_hello(encode(Hello{.operation = Operation::send, .max_size = 0, .depth = 16})), ProtocolError);
  EXPECT_THROW(decode_hello(encode(Hello{.operation = Operation::send, .max_size = 64, .depth = 0})), ProtocolError);
  EXPECT_THROW(decode_hello(encode(Hello{.operation = Operation::send, .max_size = max_message_size + 1, .depth = 1})),
               ProtocolError);
}

TEST(BwAnswer, RoundTripsAndIsNotAHello) {
  const Answer answer{.address = 0x00007f0012345678ULL, .rkey = 0xdeadbeef, .length = 65536};
  EXPECT_EQ(decode_answer(encode(answer)), answer);
  EXPECT_THROW(decode_hello(encode(answer)), ProtocolError);
  EXPECT_THROW(decode_answer(encode(Hello{.operation = Operation::send, .max_size = 64, .depth = 16})), ProtocolError);
  EXPECT_THROW(decode_answer(encode(Answer{.address = 1, .rkey = 2, .length = 0})), ProtocolError);
}

}  // namespace
}  // namespace rdmakit::bw
