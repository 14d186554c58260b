#include "lib/tool/job.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/base/untrusted_json.hpp"

namespace rdmakit {

void require_same_arguments(Job& job, const nlohmann::json& arguments, const std::vector<std::string>& may_differ) {
  auto shared = arguments;
  for (const auto& key : may_differ) shared.erase(key);
  const auto all = job.all_gather(shared.dump());
  // Options are one flat object: a rank that sends more is not this build.
  constexpr std::size_t options_depth = 4;
  const auto first = parse_untrusted_json(all.front(), options_depth, "rank 0's options");
  for (std::size_t rank = 1; rank < all.size(); ++rank) {
    const auto other = parse_untrusted_json(all[rank], options_depth, fmt::format("rank {}'s options", rank));
    if (other == first) continue;
    std::vector<std::string> keys;
    for (const auto& [key, value] : first.items()) {
      if (!other.contains(key) || other[key] != value) keys.push_back(key);
    }
    for (const auto& [key, value] : other.items()) {
      if (!first.contains(key)) keys.push_back(key);
    }
    throw UsageError(fmt::format("rank {}'s options differ from rank 0's in {}: every rank must measure alike", rank,
                                 fmt::join(keys, ", ")));
  }
}

}  // namespace rdmakit
