// perftest's out-of-band messages (lib/send_bw/perftest_exchange): each decoder's refusals,
// and three exchanges captured between Debian 12's stock tools (tests/fixtures/perftest),
// read message by message in the order perftest sends them, each record written again
// byte for byte by our encoder.

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sys/socket.h>
#include <unistd.h>

#include "lib/base/error.hpp"
#include "lib/send_bw/perftest_conversation.hpp"
#include "lib/send_bw/perftest_exchange.hpp"
#include "tests/unit/socket_pair.hpp"
#include "tests/unit/source_docs.hpp"

namespace {

namespace perftest = rdmakit::bw::perftest;
using rdmakit::ProtocolError;
using Bytes = std::vector<std::uint8_t>;

Bytes text_bytes(const std::string& text, std::size_t size) {
  Bytes bytes(text.begin(), text.end());
  bytes.resize(size, 0);
  return bytes;
}

std::string fmt_message(std::size_t index, const char* what) {
  return "message " + std::to_string(index) + " " + what;
}

struct Message {
  bool from_client = false;
  Bytes bytes;
};

// A capture: one message a line, "> HEX" what the client wrote, "< HEX" what it read.
std::vector<Message> capture(const std::string& name) {
  std::ifstream in(rdmakit::testing::source_root / "tests" / "fixtures" / "perftest" / name);
  EXPECT_TRUE(in) << name;
  std::vector<Message> messages;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.front() == '#') continue;
    Message message{.from_client = line.front() == '>', .bytes = {}};
    for (std::size_t i = 2; i + 1 < line.size(); i += 2) {
      message.bytes.push_back(static_cast<std::uint8_t>(std::stoi(line.substr(i, 2), nullptr, 16)));
    }
    messages.push_back(std::move(message));
  }
  return messages;
}

// The prefix every perftest test opens with: version, page size, cache line and path MTU,
// each written by the client and answered by the server.
std::size_t read_prefix(const std::vector<Message>& messages) {
  EXPECT_GE(messages.size(), 8U);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(messages[i].from_client, i % 2 == 0) << "message " << i;
  for (std::size_t i : {0, 1}) {
    const auto version = perftest::decode_version(messages[i].bytes);
    EXPECT_EQ(version.text, "6.06");
    EXPECT_FALSE(version.negotiates_parameters);
  }
  EXPECT_EQ(perftest::decode_page_size(messages[2].bytes), 4096U);
  EXPECT_EQ(perftest::decode_page_size(messages[3].bytes), 4096U);
  EXPECT_EQ(perftest::decode_cache_line(messages[4].bytes), 64U);
  EXPECT_EQ(perftest::decode_cache_line(messages[5].bytes), 64U);
  EXPECT_EQ(perftest::decode_mtu(messages[6].bytes), 3);  // 1024 bytes: rxe on a 1500-byte netdev
  EXPECT_EQ(perftest::decode_mtu(messages[7].bytes), 3);
  // What we would have written in their place is what they wrote.
  const auto version = perftest::encode_version();
  EXPECT_EQ(Bytes(version.begin(), version.end()), messages[0].bytes);
  const auto page = perftest::encode_size_field(4096);
  EXPECT_EQ(Bytes(page.begin(), page.end()), messages[2].bytes);
  const auto mtu = perftest::encode_mtu(3);
  EXPECT_EQ(Bytes(mtu.begin(), mtu.end()), messages[6].bytes);
  return 8;
}

// COUNT destination records from AT, alternating client and server, each side's the same
// every time (perftest keeps the last copy), with the GID of the one address both ran on.
std::size_t read_records(const std::vector<Message>& messages, std::size_t at, std::size_t count) {
  const std::array<std::uint8_t, 16> gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 55, 0, 1};
  for (std::size_t i = at; i < at + count; ++i) {
    const auto& message = messages.at(i);
    EXPECT_EQ(message.from_client, (i - at) % 2 == 0) << "message " << i;
    const auto record = perftest::decode_destination(message.bytes, true);
    EXPECT_EQ(record.gid, gid);
    EXPECT_EQ(record.lid, 0);  // RoCE
    EXPECT_EQ(record.srqn, 0U);
    EXPECT_EQ(perftest::encode(record), message.bytes) << "message " << i;
    EXPECT_EQ(message.bytes, messages.at(at + (i - at) % 2).bytes) << "message " << i << " changed";
  }
  return at + count;
}

void expect_done(const std::vector<Message>& messages, std::size_t at) {
  ASSERT_EQ(messages.size(), at + 1);
  EXPECT_TRUE(messages[at].from_client);
  EXPECT_EQ(messages[at].bytes, Bytes(perftest::done_message.begin(), perftest::done_message.end()));
}

TEST(PerftestCapture, SendBandwidth) {
  const auto messages = capture("ib_send_bw-6.06.exchange");
  // One QP: its record, a barrier, the record again, the barrier before the run, the close.
  const auto at = read_records(messages, read_prefix(messages), 10);
  expect_done(messages, at);
  EXPECT_EQ(perftest::decode_destination(messages[8].bytes, true).out_reads, 1);
}

// WRITE and READ: the record, again, a barrier, the barrier that ends the run, the client's
// five figures (the server's answers to them are its stack's leftovers), the close.
void expect_one_sided(const std::string& name, std::uint16_t client_out_reads) {
  const auto messages = capture(name);
  auto at = read_records(messages, read_prefix(messages), 8);
  std::array<std::array<std::uint8_t, perftest::results_field_size>, perftest::results_fields> fields{};
  for (auto& field : fields) {
    ASSERT_TRUE(messages.at(at).from_client);
    ASSERT_EQ(messages.at(at).bytes.size(), field.size());
    std::copy(messages[at].bytes.begin(), messages[at].bytes.end(), field.begin());
    at += 2;
  }
  const auto results = perftest::decode_results(fields);
  EXPECT_EQ(results.message_size, 65536U);
  EXPECT_EQ(results.iterations, 5U);
  EXPECT_GT(results.average_mb_per_s, 0.0);
  EXPECT_GE(results.peak_mb_per_s, results.average_mb_per_s);
  EXPECT_NEAR(results.message_rate_mpps, results.average_mb_per_s * 1048576.0 / 65536.0 / 1e6, 1e-9);
  EXPECT_EQ(perftest::encode(results), fields);
  at = read_records(messages, at, 2);
  expect_done(messages, at);
  EXPECT_EQ(perftest::decode_destination(messages[8].bytes, true).out_reads, client_out_reads);
}

TEST(PerftestCapture, WriteBandwidth) {
  expect_one_sided("ib_write_bw-6.06.exchange", 1);
}

// rxe answers up to 128 READs in flight, and perftest offers the device's maximum.
TEST(PerftestCapture, ReadBandwidth) {
  expect_one_sided("ib_read_bw-6.06.exchange", 128);
}

TEST(PerftestVersion, RefusesWhatPerftestWouldNotTake) {
  EXPECT_EQ(perftest::decode_version(text_bytes("6.29", 16)).negotiates_parameters, true);
  EXPECT_EQ(perftest::decode_version(text_bytes("5.70", 16)).number, 5.7);
  EXPECT_THROW(perftest::decode_version(text_bytes("5.60", 16)), ProtocolError);
  EXPECT_THROW(perftest::decode_version(text_bytes("", 16)), ProtocolError);
  EXPECT_THROW(perftest::decode_version(text_bytes("six", 16)), ProtocolError);
  EXPECT_THROW(perftest::decode_version(text_bytes("-7", 16)), ProtocolError);
  EXPECT_THROW(perftest::decode_version(text_bytes("6.06", 15)), ProtocolError);
  EXPECT_THROW(perftest::decode_version(text_bytes("0123456789abcdef", 16)), ProtocolError);  // no NUL
  auto junk_after = text_bytes("6.06", 16);
  junk_after[10] = 'x';
  EXPECT_THROW(perftest::decode_version(junk_after), ProtocolError);
}

TEST(PerftestGeometry, BoundedAndTheLargerKept) {
  const auto field = [](std::uint32_t value) {
    const auto bytes = perftest::encode_size_field(value);
    return Bytes(bytes.begin(), bytes.end());
  };
  EXPECT_EQ(perftest::decode_page_size(field(65536)), 65536U);
  for (std::uint32_t bad : {0U, 2048U, 4097U, 131072U, 0x80000000U}) {
    EXPECT_THROW(perftest::decode_page_size(field(bad)), ProtocolError) << bad;
  }
  EXPECT_THROW(perftest::decode_cache_line(field(1024)), ProtocolError);
  EXPECT_THROW(perftest::decode_cache_line(Bytes{0, 0, 64}), ProtocolError);
  const auto both = perftest::agreed({.page_size = 4096, .cache_line = 128}, {.page_size = 65536, .cache_line = 64});
  EXPECT_EQ(both, (perftest::Geometry{.page_size = 65536, .cache_line = 128}));
}

TEST(PerftestMtu, OneDigitAndItsNul) {
  EXPECT_EQ(perftest::decode_mtu(Bytes{'5', 0}), 5);
  for (const auto& bad : {Bytes{'0', 0}, Bytes{'6', 0}, Bytes{'3', '3'}, Bytes{'3'}, Bytes{'3', 0, 0}}) {
    EXPECT_THROW(perftest::decode_mtu(bad), ProtocolError);
  }
  EXPECT_THROW(perftest::encode_mtu(6), std::invalid_argument);
}

TEST(PerftestDestination, WithoutGidIs59Bytes) {
  perftest::Destination d;
  d.lid = 0x1a;
  d.out_reads = 16;
  d.qpn = 0xabcdef;
  d.psn = 0x123456;
  d.rkey = 0xdeadbeef;
  d.vaddr = 0x7f0011223344;
  const auto bytes = perftest::encode(d);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end() - 1), "001a:0010:abcdef:123456:deadbeef:00007f0011223344:00000000");
  ASSERT_EQ(bytes.size(), perftest::record_size);
  EXPECT_EQ(perftest::decode_destination(bytes, false), d);
  // Both sides decide the size from their own -x: a record of the other size is a mismatch.
  EXPECT_THROW(perftest::decode_destination(bytes, true), ProtocolError);
  auto upper = bytes;
  upper[12] = 'C';
  EXPECT_EQ(perftest::decode_destination(upper, false).qpn, 0xabCdefU);
}

TEST(PerftestDestination, RefusesEveryMalformedField) {
  perftest::Destination d;
  d.qpn = 1;
  d.psn = 2;
  d.gid = std::array<std::uint8_t, 16>{0xfe, 0x80};
  const auto good = perftest::encode(d);
  ASSERT_EQ(good.size(), perftest::record_size_with_gid);
  EXPECT_EQ(perftest::decode_destination(good, true), d);
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (std::uint8_t replacement : {std::uint8_t{'g'}, std::uint8_t{':'}, std::uint8_t{0}, std::uint8_t{' '}}) {
      if (good[i] == replacement) continue;
      auto bad = good;
      bad[i] = replacement;
      EXPECT_THROW(perftest::decode_destination(bad, true), ProtocolError) << "byte " << i << " as " << replacement;
    }
  }
  EXPECT_THROW(perftest::decode_destination(Bytes(good.begin(), good.end() - 1), true), ProtocolError);
  d.qpn = 0x1000000;
  EXPECT_THROW(perftest::encode(d), std::invalid_argument);
}

TEST(PerftestResults, FiguresMustBeFigures) {
  const perftest::Results r{.message_size = 4096,
                            .iterations = 1000,
                            .peak_mb_per_s = 11000.5,
                            .average_mb_per_s = 10999.25,
                            .message_rate_mpps = 2.815808};
  EXPECT_EQ(perftest::decode_results(perftest::encode(r)), r);
  for (double bad : {-1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    auto wrong = r;
    wrong.average_mb_per_s = bad;
    EXPECT_THROW(perftest::decode_results(perftest::encode(wrong)), ProtocolError) << bad;
  }
}

// ---- the conversation, played against each side of a capture ----

// The peer's side of a capture over `fd`: its messages written, ours read and compared with
// the captured ones (but `unchecked`, which the captured peer filled from its own stack).
// Closes `fd` at the end, as perftest exits.
std::vector<std::string> play_peer(int fd, const std::vector<Message>& messages, bool peer_is_client,
                                   const std::vector<std::size_t>& unchecked) {
  std::vector<std::string> mismatches;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const auto& message = messages[i];
    if (message.from_client == peer_is_client) {
      if (::write(fd, message.bytes.data(), message.bytes.size()) != static_cast<ssize_t>(message.bytes.size())) {
        mismatches.push_back(fmt_message(i, "could not be written"));
        break;
      }
      continue;
    }
    Bytes got(message.bytes.size());
    std::size_t have = 0;
    while (have < got.size()) {
      const auto n = ::read(fd, got.data() + have, got.size() - have);
      if (n <= 0) break;
      have += static_cast<std::size_t>(n);
    }
    if (have != got.size()) {
      mismatches.push_back(fmt_message(i, "ended early"));
      break;
    }
    if (got != message.bytes && std::find(unchecked.begin(), unchecked.end(), i) == unchecked.end()) {
      mismatches.push_back(fmt_message(i, "differs"));
    }
  }
  ::close(fd);
  return mismatches;
}

// The conversation's side: COUNT records (one QP) of the capture's side, the steps of
// OPERATION's program, the capture's results where there are any.
void converse(int fd, bool client, const std::vector<Message>& messages, rdmakit::bw::Operation operation,
              rdmakit::bw::Test test) {
  perftest::Conversation conversation(fd, client, std::chrono::seconds(5), -1);
  const auto agreed = conversation.open({.page_size = 4096, .cache_line = 64}, 3);
  EXPECT_EQ(agreed.peer.text, "6.06");
  EXPECT_EQ(agreed.mtu, 3);
  // Our record: the one the captured side sent (message 8 is the client's, 9 the server's).
  const auto ours = perftest::decode_destination(messages.at(client ? 8 : 9).bytes, true);
  const auto theirs_expected = perftest::decode_destination(messages.at(client ? 9 : 8).bytes, true);
  for (const auto step : perftest::program_steps(operation, test)) {
    switch (step) {
      case perftest::Step::records:
        EXPECT_EQ(conversation.exchange_records({ours}, true).at(0), theirs_expected);
        break;
      case perftest::Step::barrier: conversation.barrier(ours, true); break;
      case perftest::Step::results: {
        std::array<std::array<std::uint8_t, 8>, 5> fields{};
        for (std::size_t i = 0; i < fields.size(); ++i) {
          std::copy(messages.at(16 + 2 * i).bytes.begin(), messages.at(16 + 2 * i).bytes.end(), fields[i].begin());
        }
        if (client) {
          conversation.send_results(perftest::decode_results(fields));
        } else {
          EXPECT_EQ(conversation.receive_results(), perftest::decode_results(fields));
        }
        break;
      }
      case perftest::Step::close: conversation.close(ours, true); break;
      case perftest::Step::connect:
      case perftest::Step::run: break;
    }
  }
}

void expect_conversation(const std::string& name, rdmakit::bw::Operation operation, bool we_are_client,
                         rdmakit::bw::Test test = rdmakit::bw::Test::bandwidth) {
  const auto messages = capture(name);
  rdmakit::testing::SocketPair pair;
  // Our server answers the client's figures with zeros, where perftest's sent its leftovers.
  std::vector<std::size_t> unchecked;
  if (!we_are_client && operation != rdmakit::bw::Operation::send && test == rdmakit::bw::Test::bandwidth) {
    unchecked = {17, 19, 21, 23, 25};
  }
  std::vector<std::string> mismatches;
  const int peer_fd = std::exchange(pair.client, -1);  // play_peer closes it
  std::thread peer([&] { mismatches = play_peer(peer_fd, messages, !we_are_client, unchecked); });
  std::string failure;
  try {
    converse(pair.server, we_are_client, messages, operation, test);
  } catch (const std::exception& error) {
    failure = error.what();
  }
  ::shutdown(pair.server, SHUT_RDWR);  // a peer still waiting for us ends
  peer.join();
  EXPECT_EQ(failure, "") << name << (we_are_client ? " (our client)" : " (our server)");
  EXPECT_TRUE(mismatches.empty()) << ::testing::PrintToString(mismatches);
}

TEST(PerftestConversation, OurClientIsTheStockClientToTheStockServer) {
  expect_conversation("ib_send_bw-6.06.exchange", rdmakit::bw::Operation::send, true);
  expect_conversation("ib_write_bw-6.06.exchange", rdmakit::bw::Operation::write, true);
  expect_conversation("ib_read_bw-6.06.exchange", rdmakit::bw::Operation::read, true);
}

TEST(PerftestConversation, OurServerIsTheStockServerToTheStockClient) {
  expect_conversation("ib_send_bw-6.06.exchange", rdmakit::bw::Operation::send, false);
  expect_conversation("ib_write_bw-6.06.exchange", rdmakit::bw::Operation::write, false);
  expect_conversation("ib_read_bw-6.06.exchange", rdmakit::bw::Operation::read, false);
}

// The latency programs: record 0 first for WRITE and READ, receives posted before the
// barrier for SEND, and no close at all for ib_write_lat.
TEST(PerftestConversation, LatencyProgramsBothWays) {
  constexpr auto latency = rdmakit::bw::Test::latency;
  for (const bool we_are_client : {true, false}) {
    expect_conversation("ib_send_lat-6.06.exchange", rdmakit::bw::Operation::send, we_are_client, latency);
    expect_conversation("ib_write_lat-6.06.exchange", rdmakit::bw::Operation::write, we_are_client, latency);
    expect_conversation("ib_read_lat-6.06.exchange", rdmakit::bw::Operation::read, we_are_client, latency);
  }
}

TEST(PerftestConversation, APeerThatStopsTalkingTimesOut) {
  rdmakit::testing::SocketPair pair;
  perftest::Conversation conversation(pair.server, true, std::chrono::milliseconds(200), -1);
  EXPECT_THROW(conversation.open({}, 3), rdmakit::RunStopped);
}

TEST(PerftestConversation, APeerThatClosesMidMessageIsAProtocolError) {
  rdmakit::testing::SocketPair pair;
  const char half[] = "6.0";
  ASSERT_EQ(::write(pair.client, half, 3), 3);
  ::close(pair.client);
  pair.client = -1;
  perftest::Conversation conversation(pair.server, false, std::chrono::seconds(5), -1);
  EXPECT_THROW(conversation.open({}, 3), ProtocolError);
}

}  // namespace
