#pragma once
// The shape both diagnosers share: the facts of a case are read once, then an ordered table of
// rules is tried, and the first whose predicate holds makes the verdict. Keeping the deciding
// apart from the wording lets a table be read top to bottom as the order of the causes.
// Internal to lib/diag/.

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <string_view>

namespace rdmakit::diag {

template <typename Facts, typename Verdict>
struct Rule {
  std::string_view name;
  bool (*applies)(const Facts&);
  Verdict (*make)(const Facts&);
};

// The first rule of the table that applies to the facts; nullptr when none does, which a table
// ending in a rule for every case never gives.
template <typename Facts, typename Verdict, std::size_t size>
const Rule<Facts, Verdict>* first_match(const Rule<Facts, Verdict> (&rules)[size], const Facts& facts) {
  const auto* const rule =
      std::ranges::find_if(rules, [&facts](const Rule<Facts, Verdict>& candidate) { return candidate.applies(facts); });
  return rule == std::end(rules) ? nullptr : rule;
}

}  // namespace rdmakit::diag
