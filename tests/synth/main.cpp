// mesh_synth: a synthetic rdma_mesh report with one planted fault, and its topology.conf, for
// scripts/bench-mesh.sh (rdma_mesh --analyse at N = 1024). Prints the planted culprit.

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <string_view>

#include "tests/synth/mesh_synth.hpp"

namespace {

// mesh_culprits' own to_string may not be linked into every build that has this tool.
std::string_view kind_name(rdmakit::mesh::CulpritKind kind) {
  switch (kind) {
    case rdmakit::mesh::CulpritKind::node: return "node";
    case rdmakit::mesh::CulpritKind::nic: return "nic";
    case rdmakit::mesh::CulpritKind::link: return "link";
    case rdmakit::mesh::CulpritKind::switch_uplinks: return "switch";
    case rdmakit::mesh::CulpritKind::cause: return "cause";
  }
  return "?";
}

struct File {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> handle;
  explicit File(const std::string& path) : handle(std::fopen(path.c_str(), "w"), &std::fclose) {
    if (!handle) throw std::runtime_error("cannot write " + path);
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A synthetic rdma_mesh report with one planted fault (tests/synth)", "mesh_synth"};
  rdmakit::synth::SynthSpec spec;
  std::string fault = "none";
  std::string out;
  std::string topology_out;
  app.add_option("--ranks", spec.ranks, "Ranks in the mesh")->required()->check(CLI::Range(2, 65536));
  app.add_option("--ranks-per-host", spec.ranks_per_host, "Ranks on each host (one NIC each)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--hosts-per-leaf", spec.hosts_per_leaf, "Hosts under each leaf switch")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--fault", fault, "The planted fault")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "node", "nic", "link", "leaf", "failed"}));
  app.add_option("--severity", spec.fault.severity, "Low figure / healthy one (0: drawn in [0.3, 0.6])")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--noise", spec.noise, "Uniform noise, +- this fraction")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.5));
  app.add_option("--test", spec.test, "The test: bw or lat")
      ->capture_default_str()
      ->check(CLI::IsMember({"bw", "lat"}));
  app.add_option("--seed", spec.seed, "Decides the victim, the severity and the noise")->capture_default_str();
  app.add_option("--out", out, "Where the JSON report goes")->required();
  app.add_option("--topology-out", topology_out, "Where its topology.conf goes");
  CLI11_PARSE(app, argc, argv);
  try {
    if (spec.test == "lat") spec.base = 5;
    spec.fault.kind = *rdmakit::synth::parse_fault(fault);
    const auto synth = rdmakit::synth::make_mesh(spec);
    rdmakit::synth::write_report(synth.table, File(out).handle.get());
    if (!topology_out.empty()) rdmakit::synth::write_topology_conf(synth.topology, File(topology_out).handle.get());
    if (synth.expected) {
      fmt::print("planted: {} {} (severity {:.2f})\n", kind_name(synth.expected->kind), synth.expected->name,
                 synth.severity);
    } else {
      fmt::print("planted: none\n");
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "mesh_synth: {}\n", e.what());
    return 2;
  }
  return 0;
}
