#pragma once
// One rank of rdma_mesh as the others see it: where it listens and whether it can take
// part. The probe fills it in (lib/mesh/local_node.hpp); the job carries it to every rank.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/described_json.hpp"

namespace rdmakit::mesh {

struct Node {
  int rank = 0;
  std::string host;
  std::string address;
  std::string address_choice;  // how the address was chosen
  std::string device;
  int port = 0;
  std::string gid;
  int gid_index = -1;    // the entry of `gid` in the port's table, -1 when not known
  std::string gid_type;  // "RoCE v2", "RoCE v1", "IB"; "" when not known
  int mtu = 0;           // the port's active MTU, bytes
  bool usable = false;
  // When the rank cannot take part: the bind diagnosis's verdict (cause, summary, fix).
  nlohmann::json verdict;
};

// A node as the report and the job's messages have it (lib/base/described_json.hpp).
nlohmann::json to_json(const Node& node);
// A node, or ProtocolError naming what is wrong at `path` ("nodes[3].port: expected an
// integer"); a key it lacks keeps its default.
Node node_from_json(const nlohmann::json& document, const std::string& path);
std::vector<Node> nodes_from_json(const nlohmann::json& document, const std::string& path);
// The node's shape and its schema definition (tests/unit/described_json_test.cpp).
std::vector<described::SchemaShape> mesh_node_shapes();

}  // namespace rdmakit::mesh
