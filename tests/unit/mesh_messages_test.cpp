// rdma_mesh's messages between ranks (lib/mesh/mesh_messages): read back as sent, and each
// way another rank's message can be wrong refused with ProtocolError naming that rank.

#include <gtest/gtest.h>

#include <string>

#include "lib/base/error.hpp"
#include "lib/mesh/mesh_json.hpp"
#include "lib/mesh/mesh_messages.hpp"
#include "tests/unit/refusal.hpp"

namespace rdmakit::mesh {
namespace {

using test::refusal;

TEST(MeshMessages, ReadBackAsSent) {
  Node node;
  node.rank = 2;
  node.host = "node-c";
  node.address = "10.0.0.3";
  node.mtu = 1024;
  node.usable = true;
  EXPECT_EQ(to_json(node_from_message(to_json(node).dump(), 2)), to_json(node));
  Observation observation{
      .source = 0,
      .destination = 3,
      .test = mesh::Test::latency,
      .sender = true,
      .attempt = {.outcome = Outcome::timed_out, .figure = 2.5, .figures = {{"p50_us", 2.5}}, .error = std::nullopt}};
  EXPECT_EQ(to_json(observation_from_message(to_json(observation).dump(), 0, 4)), to_json(observation));
}

TEST(MeshMessages, RefuseWhatDoesNotFitNamingTheRank) {
  EXPECT_EQ(refusal([] { (void)node_from_message(R"({"rank": 1e300})", 3); }),
            "rank 3's message: 'rank' is missing or not an integer");
  EXPECT_NE(refusal([] { (void)node_from_message(R"({"host": 7})", 3); }).find("rank 3's description"),
            std::string::npos);
  EXPECT_EQ(refusal([] { (void)node_from_message("[1]", 3); }), "rank 3's description is not a JSON object");
  const std::string observation =
      R"({"source":0,"destination":9,"test":"bw","sender":true,"attempt":{"outcome":"completed","figure":1,"figures":{},"error":null}})";
  EXPECT_EQ(refusal([&] { (void)observation_from_message(observation, 1, 4); }),
            "rank 1's observation: 'destination' is 9, outside 0..3");
  EXPECT_NE(refusal([] {
              (void)observation_from_message(std::string(100, '[') + std::string(100, ']'), 1, 4);
            }).find("nests deeper"),
            std::string::npos);
  std::string unknown = observation;
  unknown.replace(unknown.find("\"destination\":9"), 15, "\"destination\":2");
  unknown.replace(unknown.find("completed"), 9, "exploded");
  EXPECT_EQ(refusal([&] { (void)observation_from_message(unknown, 1, 4); }),
            "rank 1's observation: attempt.outcome: 'exploded' is not one of completed, interrupted, "
            "peer_disconnected, timed_out, failed, usage_error, unsupported");
}

}  // namespace
}  // namespace rdmakit::mesh
