#pragma once
// One rank of rdma_mesh as the others see it: where it listens and whether it can take
// part. The probe fills it in (lib/mesh/local_node.hpp); the job carries it to every rank.

#include <string>

#include <nlohmann/json.hpp>

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

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Node, rank, host, address, address_choice, device, port, gid, gid_index,
                                                gid_type, mtu, usable, verdict)

}  // namespace rdmakit::mesh
