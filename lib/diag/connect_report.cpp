#include "lib/diag/connect_report.hpp"

#include <optional>

#include <fmt/format.h>

namespace rdmakit::diag {

namespace {

// The first part of the run that Ctrl-C cut short, if any.
std::optional<std::string> interrupted_during(const ConnectCase& connect_case) {
  for (const auto& step : connect_case.attempt.steps) {
    if (step.status == StepStatus::interrupted) return std::string(step_name(step.name));
  }
  for (const auto& check : connect_case.attempt.data) {
    if (check.status == StepStatus::interrupted) return "the data check (" + check.operation + ")";
  }
  if (connect_case.agent.status == AgentStatus::interrupted) return std::string("the agent's answer");
  return std::nullopt;
}

}  // namespace

void ConnectResult::add_to(nlohmann::json& document) const {
  document["capture"] = to_json(case_);
  document["verdict"] = to_json(verdict_);
}

std::string render_connect_verdict(const ConnectVerdict& verdict, const SiblingNames& siblings) {
  std::string text = fmt::format("{}: {}: {}\n", siblings.diag_connect(), verdict.cause.name(), verdict.summary);
  for (const auto& line : verdict.evidence) text += "  " + line + "\n";
  text += render_remedy(verdict);
  if (!verdict.candidates.empty()) {
    text += "  could not tell apart:";
    for (const auto& candidate : verdict.candidates) text += " " + candidate;
    text += "\n";
  }
  return text;
}

void add_connect_result(ConnectCase connect_case, Report& report) {
  connect_case.siblings = report.siblings;
  const auto& attempt = connect_case.attempt;
  report.local_address = attempt.source_address.empty() ? attempt.bind : attempt.source_address;
  report.peer_address = attempt.target;
  for (const auto& step : attempt.steps) {
    if (step.status != StepStatus::skipped) report.add_timing(step.name, step.ms);
  }
  auto verdict = diagnose_connect(connect_case);
  const auto cut_short = interrupted_during(connect_case);
  if (cut_short) {
    report.stop(StopReason::interrupted, "interrupted during " + *cut_short);
  } else {
    report.exit_code = verdict.exit_code;
  }
  report.add(ConnectResult(std::move(connect_case), std::move(verdict), cut_short.has_value()));
}

}  // namespace rdmakit::diag
