// The frames after the key handshake (lib/net/sealed_frames): the message keys and tags
// against values Python's hmac module computes (RFC 5869 HKDF by hand), frames that round
// trip, and each way a host on the path could tamper with them: a changed byte, a replayed,
// dropped or reordered frame, a frame sent back the other way, an oversized length.

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>

#include <fmt/format.h>

#include "lib/base/wait.hpp"
#include "lib/net/key_handshake.hpp"
#include "lib/net/sealed_frames.hpp"
#include "lib/net/shared_key.hpp"
#include "lib/net/stream_io.hpp"
#include "socket_pair.hpp"

namespace rdmakit::sealed {
namespace {

template <typename Bytes>
std::string hex(const Bytes& bytes) {
  std::string text;
  for (const auto byte : bytes) text += fmt::format("{:02x}", static_cast<std::uint8_t>(byte));
  return text;
}

handshake::MessageKeys test_keys() {
  const std::string text = "the right key, 24 bytes";
  handshake::Nonce server{};
  handshake::Nonce client{};
  server.fill(0x11);
  client.fill(0x22);
  return handshake::message_keys(SharedKey{.bytes = {text.begin(), text.end()}}, handshake::Service::agent, server,
                                 client);
}

TEST(SealedFrames, MessageKeysAreHkdfSha256OfTheKeyAndBothNonces) {
  const auto keys = test_keys();
  // hmac.new(hmac.new(server_nonce + client_nonce, key, sha256).digest(),
  //          b"rdmakit seal\x01c>s\x01", sha256): HKDF-SHA256, one block.
  EXPECT_EQ(hex(keys.to_server), "c5d8148d96611930e761e8894f1adbb732207c8d1ff5f9ebfe41f7ad1208e177");
  EXPECT_EQ(hex(keys.to_client), "f9c635e42a2cae4ec77dfd8bd0ad8e595c24407467f7f20fef0ecc4d67343a1c");
  // hmac.new(to_server, struct.pack(">QI", 3, 5) + b"hello", sha256)
  EXPECT_EQ(hex(frame_tag(keys.to_server, 3, "hello")),
            "af460d6f6f4a3536cd7028bac43be0af7a681b16a88d714b42869dfe2a6a12f9");
}

TEST(SealedFrames, RoundTripWithAndWithoutAKey) {
  for (const bool keyed : {false, true}) {
    const auto keys = test_keys();
    FrameWriter writer(keyed ? std::optional(keys.to_server) : std::nullopt);
    FrameReader reader(keyed ? std::optional(keys.to_server) : std::nullopt, 100, "the client");
    // One statement each: the operands of + are sealed in no set order.
    std::string stream = writer.seal("first");
    stream += writer.seal("");
    stream += writer.seal("third");
    EXPECT_EQ(stream.size(), 3 * (length_bytes + (keyed ? tag_bytes : 0)) + 10);
    // Byte by byte: nothing is taken before a whole frame is there.
    std::string buffered;
    std::vector<std::string> taken;
    for (const char byte : stream) {
      buffered.push_back(byte);
      while (auto payload = reader.take(buffered)) taken.push_back(*payload);
    }
    EXPECT_EQ(taken, (std::vector<std::string>{"first", "", "third"}));
    EXPECT_TRUE(buffered.empty());
  }
}

TEST(SealedFrames, EveryChangedByteIsCaught) {
  const auto keys = test_keys();
  FrameWriter writer(keys.to_client);
  const auto frame = writer.seal(R"({"verdict":"ok"})");
  // Any byte of the payload or the tag; a changed length is a shorter or longer frame whose
  // tag is then wrong too, or one over the limit.
  for (std::size_t at = length_bytes; at < frame.size(); ++at) {
    auto changed = frame;
    changed[at] = static_cast<char>(changed[at] ^ 0x01);
    FrameReader reader(keys.to_client, 1000, "the agent");
    EXPECT_THROW(reader.take(changed), TamperedError) << "byte " << at;
  }
}

TEST(SealedFrames, ReplayedDroppedReorderedOrReflectedFramesAreCaught) {
  const auto keys = test_keys();
  FrameWriter writer(keys.to_server);
  const auto first = writer.seal("start rping");
  const auto second = writer.seal("finish rping");
  const auto try_stream = [&](std::string stream, const MessageKey& key) {
    FrameReader reader(key, 1000, "the peer");
    std::string error;
    try {
      while (reader.take(stream)) {
      }
    } catch (const TamperedError& tampered) {
      error = tampered.what();
    }
    return error;
  };
  EXPECT_EQ(try_stream(first + second, keys.to_server), "");
  EXPECT_NE(try_stream(first + first, keys.to_server).find("message 1 from the peer fails its MAC"), std::string::npos);
  EXPECT_NE(try_stream(second, keys.to_server).find("message 0"), std::string::npos);
  EXPECT_NE(try_stream(second + first, keys.to_server), "");
  // The client's frame sent back to it as if from the server.
  EXPECT_NE(try_stream(first, keys.to_client), "");
}

TEST(SealedFrames, LengthOverTheLimitIsRefusedFromItsFirstFourBytes) {
  FrameWriter writer;
  auto frame = writer.seal(std::string(101, 'x'));
  frame.resize(length_bytes);
  FrameReader reader(std::nullopt, 100, "the client");
  try {
    reader.take(frame);
    FAIL() << "a 101-byte message was taken under a limit of 100";
  } catch (const TamperedError&) {
    FAIL() << "an oversized length is not tampering";
  } catch (const ProtocolError& refused) {
    EXPECT_NE(std::string(refused.what()).find("101 bytes, over the limit of 100"), std::string::npos)
        << refused.what();
  }
}

using testing::SocketPair;

TEST(SealedFrames, OverASocketWithDeadlines) {
  const auto keys = test_keys();
  SocketPair pair(SOCK_NONBLOCK);
  FrameWriter writer(keys.to_client);
  FrameReader reader(keys.to_client, 1 << 20, "the agent");
  std::string buffered;
  // A frame larger than the socket's buffer, taken while it is sent.
  const std::string big(600 * 1024, 'a');
  auto frames = writer.seal(big);
  frames += writer.seal("after");
  auto sent = std::async(std::launch::async, [&] {
    return rdmakit::tcp::send_bytes(pair.server, frames, Clock::now() + std::chrono::seconds(5), -1);
  });
  EXPECT_EQ(receive_frame(pair.client, reader, buffered, Clock::now() + std::chrono::seconds(5), -1), big);
  EXPECT_TRUE(sent.get());
  EXPECT_EQ(receive_frame(pair.client, reader, buffered, Clock::now() + std::chrono::seconds(5), -1), "after");
  // Silence: nullopt at the deadline.
  const auto started = Clock::now();
  EXPECT_EQ(receive_frame(pair.client, reader, buffered, started + std::chrono::milliseconds(100), -1), std::nullopt);
  EXPECT_GE(Clock::now() - started, std::chrono::milliseconds(100));
  // Half a frame, then the peer closes: said as such.
  const auto half = writer.seal("cut short");
  ASSERT_EQ(::send(pair.server, half.data(), 10, 0), 10);
  shutdown(pair.server, SHUT_WR);
  try {
    receive_frame(pair.client, reader, buffered, Clock::now() + std::chrono::seconds(5), -1);
    FAIL() << "half a frame was taken";
  } catch (const ProtocolError& cut) {
    EXPECT_NE(std::string(cut.what()).find("in the middle of a message (10 bytes in)"), std::string::npos)
        << cut.what();
  }
}

// A whole keyed handshake leaves the two sides matching keys: what one seals the other opens.
TEST(SealedFrames, HandshakeKeysMatchAcrossTheTwoSides) {
  const std::string text = "the right key, 24 bytes";
  const SharedKey key{.bytes = {text.begin(), text.end()}};
  SocketPair pair(SOCK_NONBLOCK);
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  auto server = std::async(std::launch::async, [&] {
    return handshake::serve_handshake(pair.server, handshake::Service::smoke, &key, deadline, -1);
  });
  const auto client = handshake::join_handshake(pair.client, handshake::Service::smoke, &key, deadline, -1);
  const auto served = server.get();
  ASSERT_TRUE(client.sending && client.receiving && served.sending && served.receiving);
  EXPECT_EQ(*client.sending, *served.receiving);
  EXPECT_EQ(*served.sending, *client.receiving);
  EXPECT_NE(*client.sending, *client.receiving);
  // Without keys: none either way.
  SocketPair open(SOCK_NONBLOCK);
  auto open_server = std::async(std::launch::async, [&] {
    return handshake::serve_handshake(open.server, handshake::Service::smoke, nullptr, deadline, -1);
  });
  const auto open_client = handshake::join_handshake(open.client, handshake::Service::smoke, nullptr, deadline, -1);
  EXPECT_FALSE(open_client.sending || open_client.receiving || open_server.get().sending);
}

}  // namespace
}  // namespace rdmakit::sealed
