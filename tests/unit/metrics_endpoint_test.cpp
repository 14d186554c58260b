// rdma_pingmesh's /metrics endpoint over loopback: what it answers, and the bounds a scraper
// meets before and while it is served (lib/net/metrics_endpoint.hpp).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "lib/base/error.hpp"
#include "lib/base/file_descriptor.hpp"
#include "lib/net/metrics_endpoint.hpp"
#include "lib/net/peer_gate.hpp"

namespace rdmakit {
namespace {

using Clock = std::chrono::steady_clock;

// A port of its own for each test: the kernel's choice, found by binding port 0 first.
std::uint16_t free_port() {
  FileDescriptor probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(probe.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  ::getsockname(probe.get(), reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.sin_port);
}

FileDescriptor connect_to(std::uint16_t port) {
  FileDescriptor socket_fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(socket_fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  return socket_fd;
}

void send_text(const FileDescriptor& socket_fd, const std::string& text) {
  EXPECT_EQ(::send(socket_fd.get(), text.data(), text.size(), MSG_NOSIGNAL), static_cast<ssize_t>(text.size()));
}

// Everything the server sends until it closes, or until `within` passes ("" either way when
// it sent nothing); `closed` says whether it closed.
std::string read_until_closed(const FileDescriptor& socket_fd, std::chrono::milliseconds within,
                              bool* closed = nullptr) {
  std::string text;
  const auto until = Clock::now() + within;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left <= 0) break;
    pollfd ready{.fd = socket_fd.get(), .events = POLLIN, .revents = 0};
    if (::poll(&ready, 1, static_cast<int>(left)) <= 0) break;
    char chunk[4096];
    const auto got = ::recv(socket_fd.get(), chunk, sizeof(chunk), 0);
    if (got <= 0) {
      if (closed != nullptr) *closed = true;
      return text;
    }
    text.append(chunk, static_cast<std::size_t>(got));
  }
  if (closed != nullptr) *closed = false;
  return text;
}

std::string get(std::uint16_t port, const std::string& request) {
  const auto socket_fd = connect_to(port);
  send_text(socket_fd, request);
  return read_until_closed(socket_fd, std::chrono::seconds(5));
}

const std::vector<openmetrics::Family> one_family = {{.name = "rdmakit_test_probes",
                                                      .type = openmetrics::Type::counter,
                                                      .unit = "",
                                                      .help = "probes",
                                                      .samples = {{.labels = {}, .value = 3}}}};

TEST(MetricsEndpoint, AnswersGetMetricsAndNothingElse) {
  const auto port = free_port();
  MetricsEndpoint endpoint({.host = "127.0.0.1", .port = port}, AllowList::parse({"127.0.0.0/8"}, "--metrics-allow"));
  endpoint.publish(one_family);
  const auto scrape = get(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(scrape.rfind("HTTP/1.1 200", 0), 0U) << scrape;
  EXPECT_NE(scrape.find("rdmakit_test_probes_total 3"), std::string::npos) << scrape;
  EXPECT_EQ(get(port, "POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n").rfind("HTTP/1.1 405", 0), 0U);
  EXPECT_EQ(get(port, "GET /other HTTP/1.1\r\nHost: x\r\n\r\n").rfind("HTTP/1.1 404", 0), 0U);
  EXPECT_EQ(
      get(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n").rfind("HTTP/1.1 413", 0), 0U);
  EXPECT_EQ(endpoint.scrapes(), 1U);
}

TEST(MetricsEndpoint, AnAddressOutsideTheAllowListIsClosedUnread) {
  const auto port = free_port();
  MetricsEndpoint endpoint({.host = "127.0.0.1", .port = port}, AllowList::parse({"10.0.0.0/8"}, "--metrics-allow"));
  EXPECT_EQ(get(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), "");
  EXPECT_EQ(endpoint.refused(), 1U);
  EXPECT_EQ(endpoint.scrapes(), 0U);
}

TEST(MetricsEndpoint, LongHeadersAreRefused) {
  const auto port = free_port();
  MetricsEndpoint endpoint({.host = "127.0.0.1", .port = port}, AllowList::parse({"127.0.0.0/8"}, "--metrics-allow"));
  const auto socket_fd = connect_to(port);
  // 64 KiB of one header: refused once 8 KiB are held, not read to the end.
  const std::string request = "GET /metrics HTTP/1.1\r\nX-Long: " + std::string(65536, 'a') + "\r\n\r\n";
  ::send(socket_fd.get(), request.data(), request.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  bool closed = false;
  const auto answer = read_until_closed(socket_fd, std::chrono::seconds(5), &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(answer.find("HTTP/1.1 200"), std::string::npos) << answer;
}

TEST(MetricsEndpoint, ASlowRequestIsCutAndOthersAreServedMeanwhile) {
  const auto port = free_port();
  MetricsEndpoint endpoint({.host = "127.0.0.1", .port = port}, AllowList::parse({"127.0.0.0/8"}, "--metrics-allow"));
  endpoint.publish(one_family);
  const auto started = Clock::now();
  const auto dripping = connect_to(port);
  send_text(dripping, "GET /metrics HTTP/1.1\r\n");
  // A byte every half second keeps it from idling out; the request's deadline still ends it.
  bool closed = false;
  for (int k = 0; k < 12 && !closed; ++k) {
    send_text(dripping, "X");
    read_until_closed(dripping, std::chrono::milliseconds(500), &closed);
  }
  EXPECT_TRUE(closed);
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(4));
  EXPECT_EQ(get(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").rfind("HTTP/1.1 200", 0), 0U);
}

TEST(MetricsEndpoint, ConnectionsPastTheCapAreClosedNotQueued) {
  const auto port = free_port();
  MetricsEndpoint endpoint({.host = "127.0.0.1", .port = port}, AllowList::parse({"127.0.0.0/8"}, "--metrics-allow"));
  // Two silent connections from one address fill its share; a third is closed at once.
  const auto first = connect_to(port);
  const auto second = connect_to(port);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto third = connect_to(port);
  bool closed = false;
  read_until_closed(third, std::chrono::seconds(1), &closed);
  EXPECT_TRUE(closed);
}

TEST(MetricsEndpoint, StopsAtOnceWithConnectionsOpen) {
  const auto port = free_port();
  auto endpoint = std::make_unique<MetricsEndpoint>(ListenAddress{.host = "127.0.0.1", .port = port},
                                                    AllowList::parse({"127.0.0.0/8"}, "--metrics-allow"));
  const auto silent = connect_to(port);
  send_text(silent, "GET /metrics HTTP/1.1\r\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto stopping = Clock::now();
  endpoint.reset();
  EXPECT_LT(Clock::now() - stopping, std::chrono::seconds(1));
}

TEST(MetricsEndpoint, APortTakenIsAUsageError) {
  const auto port = free_port();
  const MetricsEndpoint first({.host = "127.0.0.1", .port = port},
                              AllowList::parse({"127.0.0.0/8"}, "--metrics-allow"));
  EXPECT_THROW(
      MetricsEndpoint({.host = "127.0.0.1", .port = port}, AllowList::parse({"127.0.0.0/8"}, "--metrics-allow")),
      UsageError);
}

}  // namespace
}  // namespace rdmakit
