#include <algorithm>
#include <array>
#include <cstddef>

#include "lib/diag/connect_diagnosis.hpp"

namespace rdmakit::diag {

namespace {

// In the enums' order.
constexpr std::array<std::string_view, 5> step_statuses{"ok", "failed", "timeout", "skipped", "interrupted"};
constexpr std::array<std::string_view, 10> agent_statuses{"ok",          "refused",         "timeout",  "unreachable",
                                                          "invalid",     "unauthenticated", "tampered", "failed",
                                                          "interrupted", "not_tried"};

template <typename Status, std::size_t N>
std::optional<Status> named(const std::array<std::string_view, N>& names, std::string_view name) {
  const auto it = std::ranges::find(names, name);
  if (it == names.end()) return std::nullopt;
  return static_cast<Status>(it - names.begin());
}

}  // namespace

std::string_view to_string(StepStatus status) {
  return step_statuses.at(static_cast<std::size_t>(status));
}

std::optional<StepStatus> step_status_named(std::string_view name) {
  return named<StepStatus>(step_statuses, name);
}

std::span<const std::string_view> step_status_names() {
  return step_statuses;
}

std::string_view to_string(AgentStatus status) {
  return agent_statuses.at(static_cast<std::size_t>(status));
}

std::optional<AgentStatus> agent_status_named(std::string_view name) {
  return named<AgentStatus>(agent_statuses, name);
}

std::span<const std::string_view> agent_status_names() {
  return agent_statuses;
}

}  // namespace rdmakit::diag
