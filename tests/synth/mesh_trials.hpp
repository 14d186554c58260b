#pragma once
// Seeded trials of locate_culprits on synthetic meshes (tests/synth/mesh_synth.hpp): how often
// the planted culprit is named. Shared by the unit test (N = 64) and mesh_trials (N = 64 and
// 1024, the table of issue 36's closing note).
//
// A trial is right when the FIRST culprit locate_culprits gives (the most certain) is the
// planted one, kind and name; for a clean mesh, when it gives none. Wrong: it gives culprits
// and the first is another (or, clean, any at all). None: a planted fault and no culprit.
// Extra counts the right trials whose list also holds other culprits (false ones beside the
// true one).

#include <cstdint>
#include <vector>

#include "lib/mesh/mesh_culprits.hpp"
#include "tests/synth/mesh_synth.hpp"

namespace rdmakit::synth {

enum class Verdict { right, wrong, none };

Verdict judge_trial(const Synth& synth, const std::vector<mesh::Culprit>& culprits);

struct TrialCounts {
  int trials = 0;
  int right = 0;
  int wrong = 0;
  int none = 0;
  int extra = 0;
  double seconds = 0;                       // locate_culprits alone, all trials together
  std::vector<std::uint64_t> failed_seeds;  // the seeds of the trials that were not right
};

// `trials` meshes of `spec` with seeds first_seed, first_seed + 1, ..., each through
// locate_culprits with its topology and the default (median) rule.
TrialCounts run_trials(SynthSpec spec, int trials, std::uint64_t first_seed);

}  // namespace rdmakit::synth
