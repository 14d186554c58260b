// diag-connect's human output: what the attempt did, where it left from, what the data check
// saw, then the verdict. Modelled on diag-bind's render_text.

#include <sstream>
#include <string>

#include <fmt/format.h>

#include "lib/base/report.hpp"
#include "lib/diag/connect_diagnosis.hpp"
#include "lib/diag/host_queries.hpp"

namespace rdmakit::diag {

namespace {

std::string step_detail(const ConnectStep& step) {
  std::string text = step.detail;
  const auto add = [&text](const std::string& part) { text += (text.empty() ? "" : ", ") + part; };
  if (step.errnum != 0) add(errno_text(step.errnum));
  if (!step.event.empty()) add(step.event);
  return text;
}

void render_steps(const ConnectAttempt& a, std::ostringstream& out) {
  out << fmt::format("connect to {}:{} ({}){}{}\n", a.target, a.port, a.port_space,
                     a.bind.empty() ? "" : " from " + a.bind,
                     a.gid_index ? fmt::format(", GID index {} checked on both hosts", *a.gid_index) : "");
  for (const auto& step : a.steps) {
    out << fmt::format("  {:<14} {:<8} {:>9.1f} ms  {}\n", step_name(step.name), to_string(step.status), step.ms,
                       step_detail(step));
  }
  if (a.rejection) {
    out << fmt::format("  rejected: reason {} ({}){}{}\n", a.rejection->reason, a.rejection->reason_text,
                       a.rejection->consumer ? ", by the application" : "",
                       a.rejection->private_data.empty() ? "" : ": \"" + a.rejection->private_data + "\"");
  }
}

void render_source(const ConnectAttempt& a, std::ostringstream& out) {
  if (a.source_address.empty() && a.source_netdev.empty() && a.device.empty()) return;
  out << "source\n";
  out << fmt::format("  {} on {}, {} port {}\n", a.source_address.empty() ? "?" : a.source_address,
                     a.source_netdev.empty() ? "?" : a.source_netdev, a.device.empty() ? "?" : a.device, a.device_port);
  if (!a.source_gid.empty()) out << fmt::format("  GID {} ({})\n", a.source_gid, a.gid_type);
  if (a.path_mtu > 0) out << fmt::format("  path MTU {}\n", a.path_mtu);
}

void render_agent(const AgentContact& agent, std::ostringstream& out) {
  out << fmt::format("agent {}: {}{}{}\n", agent.address.empty() ? "(none)" : agent.address, to_string(agent.status),
                     agent.ms > 0 ? fmt::format(" ({:.1f} ms)", agent.ms) : "",
                     agent.detail.empty() ? "" : ": " + agent.detail);
}

void render_data(const ConnectAttempt& a, std::ostringstream& out) {
  if (a.data.empty()) return;
  out << "data check\n";
  for (const auto& check : a.data) {
    out << fmt::format("  {:<6} {:>10} {:<8} {:>10.1f} us  {}\n", check.operation, human_bytes(check.bytes),
                       to_string(check.status), check.us, check.detail);
  }
}

}  // namespace

std::string render_remedy(const ConnectVerdict& v) {
  std::string text;
  if (!v.fix.empty()) {
    const std::string where = v.fix_host == "both" ? " (on both hosts)"
                              : v.fix_host.empty() ? ""
                                                   : " (on the " + v.fix_host + ")";
    text += fmt::format("  fix{}: {}\n", where, v.fix);
  }
  if (!v.next.empty()) text += "  next: " + v.next + "\n";
  return text;
}

std::string render_connect_text(const ConnectCase& connect_case, const ConnectVerdict& v) {
  std::ostringstream out;
  render_steps(connect_case.attempt, out);
  render_source(connect_case.attempt, out);
  render_agent(connect_case.agent, out);
  render_data(connect_case.attempt, out);
  out << fmt::format("verdict: {}: {} (exit {})\n", v.cause.name(), v.summary, static_cast<int>(v.exit_code));
  for (const auto& line : v.evidence) out << "  " << line << "\n";
  out << render_remedy(v);
  if (!v.candidates.empty()) out << "  candidates: " << join(v.candidates) << "\n";
  for (const auto& warning : v.warnings) out << "  warning: " << warning << "\n";
  return out.str();
}

}  // namespace rdmakit::diag
