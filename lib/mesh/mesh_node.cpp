#include "lib/mesh/mesh_node.hpp"

namespace rdmakit::mesh {

namespace {

using described::Describes;

// The verdict is diag-bind's (or the rank's own when it has no address), kept as it came: an
// object, or null for a usable rank.
struct MeshNodeJson : described::ObjectOrNullLeaf {
  // The job's ranks (rdma_mesh runs up to 16384) and the names a host gives itself.
  static constexpr described::ReadLimits limits{.max_text_bytes = 1024, .max_list_entries = 65536};
  static constexpr auto missing_keys = described::MissingKeys::keep_defaults;

  static void members(Describes<Node> auto& node, auto&& visit) {
    visit("rank", node.rank);
    visit("host", node.host);
    visit("address", node.address);
    visit("address_choice", node.address_choice);
    visit("device", node.device);
    visit("port", node.port);
    visit("gid", node.gid);
    visit("gid_index", node.gid_index);
    visit("gid_type", node.gid_type);
    visit("mtu", node.mtu);
    visit("usable", node.usable);
    visit("verdict", node.verdict);
  }
};

}  // namespace

nlohmann::json to_json(const Node& node) {
  return described::write<MeshNodeJson>(node);
}

Node node_from_json(const nlohmann::json& document, const std::string& path) {
  return described::read_document<MeshNodeJson, Node>(document, path);
}

std::vector<Node> nodes_from_json(const nlohmann::json& document, const std::string& path) {
  return described::read_document<MeshNodeJson, std::vector<Node>>(document, path);
}

std::vector<described::SchemaShape> mesh_node_shapes() {
  return {{.schema = "rdma_mesh",
           .pointer = "/$defs/node",
           .shape = described::shape<MeshNodeJson, Node>(),
           .extra_keys = {}}};
}

}  // namespace rdmakit::mesh
