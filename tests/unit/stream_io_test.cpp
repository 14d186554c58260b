// The side channels' TCP listener (lib/net/stream_io): a peer the admission check refuses is
// closed before a byte is read, the next one is served, and the wait ends at its deadline.

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <optional>
#include <string>

#include "lib/base/error.hpp"
#include "lib/base/wait.hpp"
#include "lib/net/stream_io.hpp"

namespace rdmakit::tcp {
namespace {

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

std::uint16_t port_of(int listener) {
  sockaddr_in bound{};
  socklen_t length = sizeof bound;
  getsockname(listener, reinterpret_cast<sockaddr*>(&bound), &length);
  return ntohs(bound.sin_port);
}

FileDescriptor connect_loopback(std::uint16_t port) {
  const auto to = loopback(port);
  return connect_to(reinterpret_cast<const sockaddr*>(&to), sizeof to, Clock::now() + std::chrono::seconds(5), -1);
}

TEST(StreamIo, RefusedPeersAreClosedUnreadAndTheNextIsServed) {
  const auto any_port = loopback(0);
  const auto listener = listen_on(reinterpret_cast<const sockaddr*>(&any_port), sizeof any_port, 4, "the test port");
  const auto port = port_of(listener.get());
  auto refused = connect_loopback(port);
  ASSERT_TRUE(send_bytes(refused.get(), "unread", Clock::now() + std::chrono::seconds(5), -1));
  auto admitted = connect_loopback(port);
  int asked = 0;
  auto accepted = accept_admitted(listener.get(), Clock::now() + std::chrono::seconds(5), -1,
                                  [&](const sockaddr*) { return ++asked > 1; });
  ASSERT_TRUE(accepted);
  EXPECT_EQ(asked, 2);
  EXPECT_EQ(reinterpret_cast<const sockaddr*>(&accepted->peer)->sa_family, AF_INET);
  // The refused peer's connection ends (closed, or reset for the bytes left unread).
  std::string got;
  try {
    EXPECT_EQ(receive_some(refused.get(), got, 16, Clock::now() + std::chrono::seconds(5), -1), std::size_t{0});
  } catch (const std::exception&) {
    SUCCEED() << "reset: it had sent bytes that were never read";
  }
  ASSERT_TRUE(send_bytes(admitted.get(), "hello", Clock::now() + std::chrono::seconds(5), -1));
  ASSERT_TRUE(receive_some(accepted->socket.get(), got, 16, Clock::now() + std::chrono::seconds(5), -1));
  EXPECT_EQ(got, "hello");
}

TEST(StreamIo, NoPeerBeforeTheDeadlineIsNothing) {
  const auto any_port = loopback(0);
  const auto listener = listen_on(reinterpret_cast<const sockaddr*>(&any_port), sizeof any_port, 4, "the test port");
  const auto accepted = accept_admitted(listener.get(), Clock::now() + std::chrono::milliseconds(50), -1,
                                        [](const sockaddr*) { return true; });
  EXPECT_FALSE(accepted);
}

TEST(StreamIo, AcceptWaitingTakesWhatIsQueuedAndNeverWaits) {
  const auto any_port = loopback(0);
  const auto listener = listen_on(reinterpret_cast<const sockaddr*>(&any_port), sizeof any_port, 4, "the test port");
  EXPECT_FALSE(accept_waiting(listener.get()));
  auto first = connect_loopback(port_of(listener.get()));
  auto second = connect_loopback(port_of(listener.get()));
  // On loopback the handshake's last ACK queues the connection before connect_to returns.
  EXPECT_TRUE(accept_waiting(listener.get()));
  EXPECT_TRUE(accept_waiting(listener.get()));
  EXPECT_FALSE(accept_waiting(listener.get()));
}

TEST(StreamIo, ReceiveExactlySaysHowFarItGotByTheDeadline) {
  const auto any_port = loopback(0);
  const auto listener = listen_on(reinterpret_cast<const sockaddr*>(&any_port), sizeof any_port, 4, "the test port");
  auto client = connect_loopback(port_of(listener.get()));
  auto served =
      accept_admitted(listener.get(), Clock::now() + std::chrono::seconds(5), -1, [](const sockaddr*) { return true; });
  ASSERT_TRUE(served);
  ASSERT_TRUE(send_bytes(client.get(), "abc", Clock::now() + std::chrono::seconds(5), -1));
  std::array<std::uint8_t, 8> into{};
  EXPECT_EQ(receive_exactly(served->socket.get(), into, Clock::now() + std::chrono::milliseconds(200), -1, "a test"),
            std::size_t{3});
  // A fresh call starts over: the bytes of the one that timed out are the caller's to keep.
  ASSERT_TRUE(send_bytes(client.get(), "defghijk", Clock::now() + std::chrono::seconds(5), -1));
  EXPECT_EQ(receive_exactly(served->socket.get(), into, Clock::now() + std::chrono::seconds(5), -1, "a test"),
            into.size());
  EXPECT_EQ(std::string(into.begin(), into.end()), "defghijk");
  close(client.release());
  try {
    receive_exactly(served->socket.get(), into, Clock::now() + std::chrono::seconds(5), -1, "a test");
    FAIL() << "a closed peer was not an error";
  } catch (const ProtocolError& closed) {
    EXPECT_NE(std::string(closed.what()).find("before any of the 8 bytes of a test"), std::string::npos)
        << closed.what();
  }
}

TEST(StreamIo, APastDeadlineStillLooksOnce) {
  int ends[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
  const FileDescriptor ours(ends[0]);
  const FileDescriptor theirs(ends[1]);
  const auto past = Clock::now() - std::chrono::seconds(1);
  EXPECT_EQ(await_events(ours.get(), POLLIN, -1, past), SocketWait::timed_out);
  ASSERT_EQ(write(theirs.get(), "x", 1), 1);
  EXPECT_EQ(await_events(ours.get(), POLLIN, -1, past), SocketWait::ready);
}

TEST(StreamIo, ATakenPortNamesWhatItWasFor) {
  const auto any_port = loopback(0);
  const auto first = listen_on(reinterpret_cast<const sockaddr*>(&any_port), sizeof any_port, 4, "the test port");
  const auto taken = loopback(port_of(first.get()));
  try {
    listen_on(reinterpret_cast<const sockaddr*>(&taken), sizeof taken, 4, "the second listener");
    FAIL() << "a second listener bound a port that is taken";
  } catch (const std::system_error& error) {
    EXPECT_EQ(error.code().value(), EADDRINUSE);
    EXPECT_NE(std::string(error.what()).find("binding the second listener"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace rdmakit::tcp
