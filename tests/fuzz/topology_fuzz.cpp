// rdma_mesh's and rdma_pingmesh's --topology: a Slurm topology.conf (with its hostlist
// expressions) or "host switch" lines, an operator's or Slurm's file. Whatever it holds, each
// parser takes it or refuses it with a usage error naming the line; what it takes is a tree:
// every host under one leaf, every switch path ending at a root. The input is the file.

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "fuzz_support.hpp"
#include "lib/base/error.hpp"
#include "lib/topology/hostlist.hpp"
#include "lib/topology/topology.hpp"

namespace {

void check_tree(const rdmakit::mesh::Topology& topology) {
  for (const auto& [host, leaf] : topology.leaf_of_host) {
    FUZZ_CHECK(!host.empty() && !leaf.empty());
    const auto path = topology.path_of(host);
    FUZZ_CHECK(!path.empty() && path.front() == leaf);
    // A path never visits a switch twice (no loop).
    FUZZ_CHECK(std::set<std::string>(path.begin(), path.end()).size() == path.size());
    FUZZ_CHECK(topology.switch_hops(host, host) == 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rdmakit;
  const auto text = fuzz::as_text(data, size);
  for (const auto parse : {&mesh::parse_slurm_topology, &mesh::parse_host_switch}) {
    try {
      check_tree(parse(text, "topology.conf"));
    } catch (const UsageError& error) {
      FUZZ_CHECK(std::string(error.what()).starts_with("topology.conf:"));
    }
  }
  // The hostlist expressions alone: bounded, each name non-empty (an empty line names none).
  for (const auto& line : fuzz::split_lines(text, 4)) {
    try {
      const auto hosts = mesh::expand_hostlist(line);
      FUZZ_CHECK(hosts.size() <= 1'000'000);
      for (const auto& host : hosts) FUZZ_CHECK(!host.empty());
    } catch (const mesh::HostlistError&) {
    }
  }
  return 0;
}
