#include "lib/core/job.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "lib/core/error.hpp"

namespace rdmakit {

void require_same_arguments(Job& job, const nlohmann::json& arguments, const std::vector<std::string>& may_differ) {
  auto shared = arguments;
  for (const auto& key : may_differ) shared.erase(key);
  const auto all = job.all_gather(shared.dump());
  const auto first = nlohmann::json::parse(all.front());
  for (std::size_t rank = 1; rank < all.size(); ++rank) {
    const auto other = nlohmann::json::parse(all[rank]);
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
