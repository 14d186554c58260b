// The side channels' key handshake (lib/net/key_handshake): its codecs, the proofs against
// values Python's hmac module computes, the server's decision, and whole handshakes over a
// socket pair, refused ones included (wrong key, no key, replay, truncated, too slow).

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "lib/base/wait.hpp"
#include "lib/net/key_handshake.hpp"
#include "lib/net/shared_key.hpp"
#include "lib/smoke/remote.hpp"
#include "socket_pair.hpp"

namespace rdmakit::handshake {
namespace {

SharedKey key_of(const std::string& text) {
  return {.bytes = {text.begin(), text.end()}};
}

Nonce filled(std::uint8_t value) {
  Nonce nonce{};
  nonce.fill(value);
  return nonce;
}

std::string hex(const Proof& proof) {
  std::string text;
  for (const auto byte : proof) text += fmt::format("{:02x}", byte);
  return text;
}

TEST(KeyHandshake, HelloIsFortyBytesBigEndian) {
  const auto bytes = encode(Hello{.service = Service::smoke, .key_required = true, .nonce = filled(7)});
  ASSERT_EQ(bytes.size(), 40U);
  EXPECT_EQ(bytes[0], 'R');
  EXPECT_EQ(bytes[3], 'H');
  EXPECT_EQ(bytes[4], version);
  EXPECT_EQ(bytes[5], 2);
  EXPECT_EQ(bytes[6], 1);
  EXPECT_EQ(bytes[39], 7);
}

TEST(KeyHandshake, MessagesRoundTrip) {
  const Hello hello{.service = Service::agent, .key_required = true, .nonce = filled(1)};
  EXPECT_EQ(decode_hello(encode(hello)), hello);
  const Answer answer{.service = Service::smoke, .has_key = true, .nonce = filled(2), .proof = filled(3)};
  EXPECT_EQ(decode_answer(encode(answer)), answer);
  const Verdict verdict{.service = Service::agent, .status = Status::wrong_key, .proof = {}};
  EXPECT_EQ(decode_verdict(encode(verdict)), verdict);
}

TEST(KeyHandshake, DecodersRefuseWhatIsNotAHandshake) {
  auto bytes = encode(Answer{.service = Service::agent, .has_key = true, .nonce = filled(2), .proof = filled(3)});
  EXPECT_THROW(decode_answer(std::span(bytes).first(71)), AuthenticationError);
  EXPECT_THROW(decode_hello(bytes), AuthenticationError);  // the answer's size is not the hello's
  auto broken = bytes;
  broken[0] = '{';  // a JSON request line from a client older than the handshake
  try {
    decode_answer(broken);
    FAIL() << "bad magic accepted";
  } catch (const AuthenticationError& refused) {
    EXPECT_NE(std::string(refused.what()).find("bad magic"), std::string::npos) << refused.what();
  }
  broken = bytes;
  broken[4] = 1;  // version 1: JSON lines after the handshake, unsealed
  EXPECT_THROW(decode_answer(broken), AuthenticationError);
  broken = bytes;
  broken[5] = 9;
  EXPECT_THROW(decode_answer(broken), AuthenticationError);
  broken = bytes;
  broken[6] = 0x81;
  EXPECT_THROW(decode_answer(broken), AuthenticationError);
  broken = bytes;
  broken[7] = 1;
  EXPECT_THROW(decode_answer(broken), AuthenticationError);
  auto verdict = encode(Verdict{});
  verdict[6] = 4;
  EXPECT_THROW(decode_verdict(verdict), AuthenticationError);
}

TEST(KeyHandshake, ProofsAreHmacSha256OverLabelServiceAndBothNonces) {
  // python3: hmac.new(key, b"rdmakit client" + bytes([1]) + server_nonce + client_nonce, sha256)
  const auto key = key_of("0123456789abcdef0123");
  EXPECT_EQ(hex(client_proof(key, Service::agent, filled(1), filled(2))),
            "2b3eb07c78676398249f04243e5e3f6e2c8e2252cc4fe8ea5b9125b11809455c");
  EXPECT_EQ(hex(server_proof(key, Service::agent, filled(2), filled(1))),
            "29e1e7e778b3a4350c1e4c5d052fe0eb5bfa5a0bc95353f1fb095cac1e99b57a");
  EXPECT_NE(client_proof(key, Service::smoke, filled(1), filled(2)),
            client_proof(key, Service::agent, filled(1), filled(2)));
}

TEST(KeyHandshake, NoncesAreFresh) {
  EXPECT_NE(fresh_nonce(), fresh_nonce());
}

Answer answer_to(const Hello& hello, const SharedKey* key) {
  Answer answer{.service = hello.service, .has_key = key != nullptr, .nonce = fresh_nonce(), .proof = {}};
  if (key != nullptr) answer.proof = client_proof(*key, hello.service, hello.nonce, answer.nonce);
  return answer;
}

TEST(KeyHandshake, ServerJudgesEachCombination) {
  const auto key = key_of("the right key, 24 bytes");
  const auto other = key_of("another key of 24 bytes!");
  const Hello hello{.service = Service::agent, .key_required = true, .nonce = fresh_nonce()};
  const auto right = answer_to(hello, &key);
  const auto accepted = judge(&key, hello, right);
  EXPECT_EQ(accepted.status, Status::accepted);
  EXPECT_TRUE(same_proof(accepted.proof, server_proof(key, Service::agent, right.nonce, hello.nonce)));
  EXPECT_EQ(judge(&key, hello, answer_to(hello, &other)).status, Status::wrong_key);
  EXPECT_EQ(judge(&key, hello, answer_to(hello, nullptr)).status, Status::client_has_no_key);
  EXPECT_EQ(judge(nullptr, hello, answer_to(hello, &key)).status, Status::server_has_no_key);
  EXPECT_EQ(judge(nullptr, hello, answer_to(hello, nullptr)).status, Status::accepted);
}

// A recorded answer was made for its connection's server nonce; the next connection's hello
// carries a new one, so the same bytes are a wrong key there.
TEST(KeyHandshake, ReplayedAnswerIsRefused) {
  const auto key = key_of("the right key, 24 bytes");
  const Hello first{.service = Service::agent, .key_required = true, .nonce = fresh_nonce()};
  const auto recorded = answer_to(first, &key);
  ASSERT_EQ(judge(&key, first, recorded).status, Status::accepted);
  const Hello next{.service = Service::agent, .key_required = true, .nonce = fresh_nonce()};
  EXPECT_EQ(judge(&key, next, recorded).status, Status::wrong_key);
}

// A server's proof is not a client's: reflecting it back fails.
TEST(KeyHandshake, ReflectedProofIsRefused) {
  const auto key = key_of("the right key, 24 bytes");
  const Hello hello{.service = Service::agent, .key_required = true, .nonce = fresh_nonce()};
  Answer reflected{.service = Service::agent, .has_key = true, .nonce = hello.nonce, .proof = {}};
  reflected.proof = server_proof(key, Service::agent, hello.nonce, hello.nonce);
  EXPECT_EQ(judge(&key, hello, reflected).status, Status::wrong_key);
}

using testing::SocketPair;

// Both sides' outcome: "" when it went through, the AuthenticationError's words otherwise.
std::pair<std::string, std::string> run_both(const SharedKey* server_key, const SharedKey* client_key,
                                             Service client_service = Service::agent) {
  SocketPair pair;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  auto server = std::async(std::launch::async, [&] {
    try {
      serve_handshake(pair.server, Service::agent, server_key, deadline, -1);
      return std::string();
    } catch (const AuthenticationError& refused) {
      shutdown(pair.server, SHUT_RDWR);
      return std::string(refused.what());
    }
  });
  std::string client;
  try {
    join_handshake(pair.client, client_service, client_key, deadline, -1);
  } catch (const AuthenticationError& refused) {
    shutdown(pair.client, SHUT_RDWR);
    client = refused.what();
  }
  return {server.get(), client};
}

TEST(KeyHandshake, OverASocket) {
  const auto key = key_of("the right key, 24 bytes");
  const auto other = key_of("another key of 24 bytes!");
  EXPECT_EQ(run_both(&key, &key), std::make_pair(std::string(), std::string()));
  EXPECT_EQ(run_both(nullptr, nullptr), std::make_pair(std::string(), std::string()));

  auto [server, client] = run_both(&key, &other);
  EXPECT_NE(server.find("wrong key"), std::string::npos) << server;
  EXPECT_NE(client.find("wrong key"), std::string::npos) << client;

  std::tie(server, client) = run_both(&key, nullptr);
  EXPECT_NE(server.find("no key"), std::string::npos) << server;
  EXPECT_NE(client.find("--key-file"), std::string::npos) << client;

  std::tie(server, client) = run_both(nullptr, &key);
  EXPECT_NE(server.find("without --key-file"), std::string::npos) << server;
  EXPECT_NE(client.find("without --key-file"), std::string::npos) << client;

  std::tie(server, client) = run_both(&key, &key, Service::smoke);
  EXPECT_NE(client.find("diag-connect agent"), std::string::npos) << client;
}

TEST(KeyHandshake, TruncatedAnswerIsRefused) {
  const auto key = key_of("the right key, 24 bytes");
  SocketPair pair;
  auto server = std::async(std::launch::async, [&] {
    try {
      serve_handshake(pair.server, Service::agent, &key, Clock::now() + std::chrono::seconds(5), -1);
      return std::string();
    } catch (const AuthenticationError& refused) {
      return std::string(refused.what());
    }
  });
  std::array<std::uint8_t, hello_bytes> hello{};
  ASSERT_EQ(read(pair.client, hello.data(), hello.size()), static_cast<ssize_t>(hello.size()));
  const auto half = encode(answer_to(decode_hello(hello), &key));
  ASSERT_EQ(write(pair.client, half.data(), answer_bytes / 2), static_cast<ssize_t>(answer_bytes / 2));
  shutdown(pair.client, SHUT_WR);
  const auto refused = server.get();
  EXPECT_NE(refused.find("closed the connection after 36 of the 72 bytes of the answer"), std::string::npos) << refused;
}

TEST(KeyHandshake, SlowClientIsRefusedAtTheDeadline) {
  const auto key = key_of("the right key, 24 bytes");
  SocketPair pair;
  const auto started = Clock::now();
  try {
    serve_handshake(pair.server, Service::agent, &key, started + std::chrono::milliseconds(200), -1);
    FAIL() << "a silent client was accepted";
  } catch (const AuthenticationError& refused) {
    EXPECT_NE(std::string(refused.what()).find("too slow"), std::string::npos) << refused.what();
  }
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(2));
}

// rdma_smoke --serve's accept: a peer with the wrong key is refused, said and closed, and
// the serving side goes on to the next peer, which has the right one.
TEST(KeyHandshake, SmokeServeRefusesAWrongKeyAndTakesTheNextPeer) {
  const auto key = key_of("the right key, 24 bytes");
  const auto other = key_of("another key of 24 bytes!");
  const auto port = static_cast<std::uint16_t>(30000 + (getpid() % 20000));
  std::vector<std::string> refused;
  auto serving = std::async(std::launch::async, [&] {
    auto channel = smoke::ControlChannel::accept_one(
        "127.0.0.1", port, Clock::now() + std::chrono::seconds(20), -1, [](const std::string&) {}, &key,
        [&refused](const std::string& line) { refused.push_back(line); });
    channel.send({{"hello", "right key"}});
  });
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  try {
    (void)smoke::ControlChannel::connect_to("127.0.0.1", port, deadline, -1, &other);
    FAIL() << "the wrong key was accepted";
  } catch (const AuthenticationError& wrong) {
    EXPECT_NE(std::string(wrong.what()).find("wrong key"), std::string::npos) << wrong.what();
  }
  auto channel = smoke::ControlChannel::connect_to("127.0.0.1", port, deadline, -1, &key);
  EXPECT_EQ(channel.receive(deadline).value("hello", ""), "right key");
  serving.get();
  ASSERT_EQ(refused.size(), 1U);
  EXPECT_NE(refused.front().find("refused 127.0.0.1:"), std::string::npos) << refused.front();
  EXPECT_NE(refused.front().find("wrong key"), std::string::npos) << refused.front();
}

// Silent connections each hold a handshake seat for handshake_timeout, not the control port:
// a peer from another address that comes after them is served at once.
TEST(KeyHandshake, SmokeServesAPeerBehindSilentConnections) {
  const auto key = key_of("the right key, 24 bytes");
  const auto port = static_cast<std::uint16_t>(30000 + ((getpid() + 13) % 20000));
  std::vector<std::string> refused;
  auto serving = std::async(std::launch::async, [&] {
    auto channel = smoke::ControlChannel::accept_one(
        "127.0.0.1", port, Clock::now() + std::chrono::seconds(30), -1, [](const std::string&) {}, &key,
        [&refused](const std::string& line) { refused.push_back(line); });
    channel.send({{"served", channel.peer()}});
  });
  // Six from 127.0.0.1 that send nothing: four hold seats, two are closed unread.
  std::vector<int> silent;
  for (int i = 0; i < 6; ++i) {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    for (;;) {
      const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in to{
          .sin_family = AF_INET, .sin_port = htons(port), .sin_addr = {htonl(INADDR_LOOPBACK)}, .sin_zero = {}};
      if (connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0) {
        silent.push_back(fd);
        break;
      }
      close(fd);
      ASSERT_LT(Clock::now(), deadline) << "the control port never listened";
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  const auto started = Clock::now();
  auto channel =
      smoke::ControlChannel::connect_to("127.0.0.1", port, started + std::chrono::seconds(20), -1, &key, "127.0.0.2");
  const auto served = channel.receive(started + std::chrono::seconds(20));
  EXPECT_EQ(served.value("served", "").rfind("127.0.0.2:", 0), 0U) << served.dump();
  // Well before the silent ones' handshake_timeout.
  EXPECT_LT(Clock::now() - started, smoke::handshake_timeout / 2);
  serving.get();
  for (const int fd : silent) close(fd);
  EXPECT_TRUE(refused.empty());  // the silent ones were ended, not judged
}

// A keyed peer's message may still be hostile: one nested past max_control_depth is refused
// before it is parsed, and the next one is read as usual.
TEST(KeyHandshake, SmokeRefusesADeeplyNestedMessage) {
  const auto key = key_of("the right key, 24 bytes");
  const auto port = static_cast<std::uint16_t>(30000 + ((getpid() + 7) % 20000));
  auto serving = std::async(std::launch::async, [&] {
    auto channel = smoke::ControlChannel::accept_one(
        "127.0.0.1", port, Clock::now() + std::chrono::seconds(20), -1, [](const std::string&) {}, &key);
    nlohmann::json deep = "bottom";
    for (std::size_t level = 0; level <= smoke::max_control_depth; ++level) deep = nlohmann::json::array({deep});
    channel.send({{"runs", deep}});
    channel.send({{"after", true}});
  });
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  auto channel = smoke::ControlChannel::connect_to("127.0.0.1", port, deadline, -1, &key);
  try {
    (void)channel.receive(deadline);
    FAIL() << "a message nested " << smoke::max_control_depth + 2 << " deep was taken";
  } catch (const ProtocolError& refused) {
    EXPECT_NE(std::string(refused.what()).find("nests deeper than 32 levels"), std::string::npos) << refused.what();
  }
  EXPECT_TRUE(channel.receive(deadline).value("after", false));
  serving.get();
}

}  // namespace
}  // namespace rdmakit::handshake
