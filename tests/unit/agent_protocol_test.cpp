// diag-connect's agent protocol: the client's request line, the probe's CM hello and the
// agent's offer (lib/diag/agent_protocol.hpp), as each side reads what the other sent.
#include "lib/diag/agent_protocol.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "lib/base/error.hpp"

namespace rdmakit::agent {
namespace {

TEST(AgentRequest, RoundTripsAndKeepsItsBounds) {
  const Request request{.address = "10.0.0.1", .port = 7471, .port_space = "udp", .source = "10.0.0.2"};
  const auto line = encode_request(request);
  ASSERT_EQ(line.back(), '}');
  EXPECT_EQ(decode_request(line), request);
  // No source: the agent routes back to the client's address.
  EXPECT_EQ(decode_request(R"({"version":1,"address":"fd00::1","port":0,"port_space":"ib"})").source, "");
}

TEST(AgentRequest, RefusesWhatIsNotARequest) {
  for (const auto* bad : {
           "",
           "GET / HTTP/1.0",
           "[1,2]",
           R"({"version":2,"address":"10.0.0.1","port":1,"port_space":"tcp"})",
           R"({"version":"1","address":"10.0.0.1","port":1,"port_space":"tcp"})",
           R"({"version":1,"port":1,"port_space":"tcp"})",
           R"({"version":1,"address":7,"port":1,"port_space":"tcp"})",
           R"({"version":1,"address":"10.0.0.1","port":65536,"port_space":"tcp"})",
           R"({"version":1,"address":"10.0.0.1","port":-1,"port_space":"tcp"})",
           R"({"version":1,"address":"10.0.0.1","port":1.5,"port_space":"tcp"})",
           R"({"version":1,"address":"10.0.0.1","port":1,"port_space":"sctp"})",
           R"({"version":1,"address":"10.0.0.1","port":1,"port_space":"tcp","source":["x"]})",
           // What the agent logs is a host, not lines of the client's choosing.
           "{\"version\":1,\"address\":\"10.0.0.1\\nanswered 10.6.6.6\",\"port\":1,\"port_space\":\"tcp\"}",
           "{\"version\":1,\"address\":\"\\u001b[2J\",\"port\":1,\"port_space\":\"tcp\"}",
           R"({"version":1,"address":"","port":1,"port_space":"tcp"})",
           R"({"version":1,"address":"10.0.0.1","port":1,"port_space":"tcp","source":"node2"})",
       }) {
    EXPECT_THROW(decode_request(bad), ProtocolError) << bad;
  }
  const std::string long_address(65, 'a');
  EXPECT_THROW(decode_request(R"({"version":1,"address":")" + long_address + R"(","port":1,"port_space":"tcp"})"),
               ProtocolError);
  EXPECT_THROW(decode_request(std::string(max_request_bytes + 1, ' ')), ProtocolError);
}

TEST(AgentHello, IsItsMagicAndVersionWhateverFollows) {
  auto hello = encode_hello({});
  ASSERT_EQ(hello.size(), hello_bytes);
  EXPECT_EQ(decode_hello(hello), Hello{});
  hello.resize(56, 0);  // the CM pads private data to the transport's size
  EXPECT_EQ(decode_hello(hello), Hello{});
  EXPECT_EQ(decode_hello(std::vector<std::uint8_t>(hello.begin(), hello.begin() + 4)), std::nullopt);
  hello[4] = version + 1;
  EXPECT_EQ(decode_hello(hello), std::nullopt);
  EXPECT_EQ(decode_hello(std::vector<std::uint8_t>(56, 0)), std::nullopt);
}

TEST(AgentHello, CarriesATicketWithinTheConnectRequestsPrivateData) {
  Ticket ticket{};
  for (std::size_t i = 0; i < ticket.size(); ++i) ticket[i] = static_cast<std::uint8_t>(i + 1);
  auto hello = encode_hello({.ticket = ticket});
  ASSERT_EQ(hello.size(), ticketed_hello_bytes);
  EXPECT_LE(hello.size(), 56U);  // an InfiniBand/RoCE REQ's private data after rdma_cm's header
  EXPECT_EQ(decode_hello(hello), Hello{.ticket = ticket});
  hello.resize(56, 0);
  EXPECT_EQ(decode_hello(hello), Hello{.ticket = ticket});
  // The flag without the ticket's bytes is no hello; flags this version does not know are
  // ignored.
  hello.resize(ticketed_hello_bytes - 1);
  EXPECT_EQ(decode_hello(hello), std::nullopt);
  auto unticketed = encode_hello({});
  unticketed.push_back(0x80);
  EXPECT_EQ(decode_hello(unticketed), Hello{});
}

TEST(AgentOffer, RoundTripsAndRefusesWhatCannotServeTheCheck) {
  const Offer offer{.address = 0x7f0000001000, .rkey = 0x1234, .length = check_buffer_bytes, .receives = 3};
  auto bytes = encode_offer(offer);
  ASSERT_EQ(bytes.size(), offer_bytes);
  EXPECT_EQ(decode_offer(bytes), offer);
  bytes.resize(148, 0);
  EXPECT_EQ(decode_offer(bytes), offer);
  // Another listener's private data (or none) is not an offer: nullopt, not an error.
  EXPECT_EQ(decode_offer({}), std::nullopt);
  EXPECT_EQ(decode_offer(std::vector<std::uint8_t>(56, 0)), std::nullopt);
  // Ours, but unusable.
  EXPECT_THROW(decode_offer(std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + 10)), ProtocolError);
  for (const auto& bad : {Offer{.address = 1, .rkey = 0, .length = check_buffer_bytes, .receives = 3},
                          Offer{.address = 1, .rkey = 5, .length = check_buffer_bytes - 1, .receives = 3},
                          Offer{.address = 1, .rkey = 5, .length = check_buffer_bytes, .receives = 0},
                          Offer{.address = 1, .rkey = 5, .length = check_buffer_bytes, .receives = 65}}) {
    EXPECT_THROW(decode_offer(encode_offer(bad)), ProtocolError);
  }
  auto other_version = encode_offer(offer);
  other_version[4] = version + 1;
  EXPECT_THROW(decode_offer(other_version), ProtocolError);
}

}  // namespace
}  // namespace rdmakit::agent
