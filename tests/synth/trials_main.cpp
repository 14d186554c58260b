// mesh_trials: locate_culprits on seeded synthetic meshes, each fault kind at N = 64 and
// N = 1024 (16 hosts a leaf; the nic fault on hosts of two ranks), printed as a markdown table
// for issue 36's note. tests/synth/mesh_trials.hpp says what counts as right.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <cstdint>
#include <vector>

#include "tests/synth/mesh_trials.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Seeded culprit trials on synthetic meshes (tests/synth)", "mesh_trials"};
  int trials = 100;
  std::vector<int> sizes{64, 1024};
  std::uint64_t seed = 1;
  bool seeds = false;
  double severity = 0;
  double noise = 0.05;
  app.add_option("--trials", trials, "Trials per fault kind and size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--ranks", sizes, "Mesh sizes")->capture_default_str()->check(CLI::Range(4, 65536));
  app.add_option("--seed", seed, "The first trial's seed")->capture_default_str();
  app.add_option("--severity", severity, "Low figure / healthy one (0: drawn in [0.3, 0.6] each trial)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--noise", noise, "Uniform noise, +- this fraction")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.5));
  app.add_flag("--seeds", seeds, "Also list the seeds of the trials that were not right");
  CLI11_PARSE(app, argc, argv);

  using rdmakit::synth::FaultKind;
  fmt::print("| fault | N | trials | named right | wrong | none | right, with extra culprits | locate time (mean) |\n");
  fmt::print("|---|---|---|---|---|---|---|---|\n");
  for (const int ranks : sizes) {
    for (const auto kind : {FaultKind::none, FaultKind::node, FaultKind::nic, FaultKind::link, FaultKind::leaf_uplink,
                            FaultKind::failed_node}) {
      rdmakit::synth::SynthSpec spec;
      spec.ranks = ranks;
      spec.ranks_per_host = kind == FaultKind::nic ? 2 : 1;
      spec.fault.kind = kind;
      spec.fault.severity = severity;
      spec.noise = noise;
      const auto counts = rdmakit::synth::run_trials(spec, trials, seed);
      fmt::print("| {} | {} | {} | {} ({:.1f}%) | {} | {} | {} | {:.1f} ms |\n", rdmakit::synth::to_string(kind), ranks,
                 counts.trials, counts.right, 100.0 * counts.right / counts.trials, counts.wrong, counts.none,
                 counts.extra, 1000 * counts.seconds / counts.trials);
      if (seeds && !counts.failed_seeds.empty()) {
        fmt::print(stderr, "{} N={}: not right with seeds {}\n", rdmakit::synth::to_string(kind), ranks,
                   fmt::join(counts.failed_seeds, " "));
      }
    }
  }
  return 0;
}
