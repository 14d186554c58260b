#include "tests/synth/mesh_trials.hpp"

#include <chrono>

namespace rdmakit::synth {

Verdict judge_trial(const Synth& synth, const std::vector<mesh::Culprit>& culprits) {
  if (!synth.expected) return culprits.empty() ? Verdict::right : Verdict::wrong;
  if (culprits.empty()) return Verdict::none;
  const auto& first = culprits.front();
  return first.kind == synth.expected->kind && first.name == synth.expected->name ? Verdict::right : Verdict::wrong;
}

TrialCounts run_trials(SynthSpec spec, int trials, std::uint64_t first_seed) {
  TrialCounts counts;
  for (int trial = 0; trial < trials; ++trial) {
    spec.seed = first_seed + static_cast<std::uint64_t>(trial);
    const Synth synth = make_mesh(spec);
    const mesh::LocateSettings settings{.judge = {}, .topology = &synth.topology, .siblings = {}};
    const auto start = std::chrono::steady_clock::now();
    const auto culprits = mesh::locate_culprits(synth.table.tests.front(), synth.table.nodes, settings);
    counts.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++counts.trials;
    switch (judge_trial(synth, culprits)) {
      case Verdict::right:
        ++counts.right;
        if (culprits.size() > 1) ++counts.extra;
        continue;
      case Verdict::wrong: ++counts.wrong; break;
      case Verdict::none: ++counts.none; break;
    }
    counts.failed_seeds.push_back(spec.seed);
  }
  return counts;
}

}  // namespace rdmakit::synth
