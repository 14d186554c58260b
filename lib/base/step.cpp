#include "lib/base/step.hpp"

#include <array>
#include <utility>

#include <nlohmann/json.hpp>

namespace rdmakit {

namespace {

// Every step, in the enum's order; step_named() and the unit test walk it.
constexpr std::array<std::pair<Step, std::string_view>, 20> names{{
    {Step::getaddrinfo, "getaddrinfo"},
    {Step::create_ep, "create_ep"},
    {Step::create_id, "create_id"},
    {Step::bind_addr, "bind_addr"},
    {Step::resolve_addr, "resolve_addr"},
    {Step::resolve_route, "resolve_route"},
    {Step::create_qp, "create_qp"},
    {Step::listen, "listen"},
    {Step::connect, "connect"},
    {Step::accept, "accept"},
    {Step::join, "join"},
    {Step::disconnect, "disconnect"},
    {Step::leave, "leave"},
    {Step::route, "route"},
    {Step::agent, "agent"},
    {Step::reg_msgs, "reg_msgs"},
    {Step::send, "send"},
    {Step::receive, "receive"},
    {Step::reply, "reply"},
    {Step::transfer, "transfer"},
}};

constexpr bool in_enum_order() {
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (static_cast<std::size_t>(names[i].first) != i) return false;
  }
  return static_cast<std::size_t>(Step::transfer) + 1 == names.size();
}
static_assert(in_enum_order(), "one name per step, in the enum's order");

}  // namespace

std::string_view step_name(Step step) {
  return names.at(static_cast<std::size_t>(step)).second;
}

std::optional<Step> step_named(std::string_view name) {
  for (const auto& [step, spelling] : names) {
    if (spelling == name) return step;
  }
  return std::nullopt;
}

bool is_cm_step(Step step) {
  return step <= Step::leave;
}

void to_json(nlohmann::json& json, Step step) {
  json = step_name(step);
}

}  // namespace rdmakit
