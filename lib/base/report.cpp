#include "lib/base/report.hpp"

#include <cstring>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "lib/base/named_values.hpp"

namespace rdmakit {

std::string_view to_string(Outcome outcome) {
  return name_in(outcome_names, outcome, "unknown");
}

std::optional<Outcome> outcome_named(std::string_view name) {
  return value_named<Outcome>(outcome_names, name);
}

Outcome outcome_of(StopReason reason) {
  switch (reason) {
    case StopReason::interrupted: return Outcome::interrupted;
    case StopReason::peer_disconnected: return Outcome::peer_disconnected;
    case StopReason::timed_out: return Outcome::timed_out;
  }
  return Outcome::failed;
}

void Report::fail(ErrorRecord error, ExitCode code) {
  errors.push_back(std::move(error));
  outcome = code == ExitCode::usage ? Outcome::usage_error : Outcome::failed;
  exit_code = code;
}

void Report::fail_afterwards(ErrorRecord error) {
  if (exit_code == ExitCode::ok) {
    fail(std::move(error));
  } else {
    errors.push_back(std::move(error));
  }
}

void Report::stop(StopReason reason, const std::string& detail) {
  errors.push_back(ErrorRecord{.message = detail, .call = {}, .errnum = 0, .hint = {}, .completion = {}});
  outcome = outcome_of(reason);
  exit_code = ExitCode::run_failed;
}

std::string errno_name(int errnum) {
  const char* name = strerrorname_np(errnum);
  return name ? name : "E?";
}

ErrorRecord record_of(const RdmaError& error, const SiblingNames& siblings) {
  return ErrorRecord{.message = error.what(),
                     .call = error.call(),
                     .errnum = error.errnum(),
                     .hint = error.hint(siblings),
                     .completion = {}};
}

ErrorRecord record_of(const CompletionError& error) {
  return ErrorRecord{.message = error.what(), .call = {}, .errnum = 0, .hint = {}, .completion = error.status()};
}

namespace {

using described::Describes;
using described::when_set;

struct ReportJson {
  static constexpr described::ReadLimits limits{.max_text_bytes = 4096, .max_list_entries = 1024};
  static constexpr auto missing_keys = described::MissingKeys::refused;

  static void members(Describes<CompletionStatus> auto& completion, auto&& visit) {
    visit("status", completion.status);
    visit("status_text", completion.text);
    visit("vendor_error", completion.vendor_error);
  }
  // "errno_name" is written beside errno (to_json(ErrorRecord)).
  static void members(Describes<ErrorRecord> auto& error, auto&& visit) {
    visit("message", error.message);
    visit("call", error.call, when_set);
    visit("errno", error.errnum, when_set);
    visit("hint", error.hint, when_set);
    visit("completion", error.completion, when_set);
  }
};

}  // namespace

nlohmann::json to_json(const ErrorRecord& e) {
  auto item = described::write<ReportJson>(e);
  if (e.errnum != 0) item["errno_name"] = errno_name(e.errnum);
  return item;
}

std::vector<ErrorRecord> error_records_from_json(const nlohmann::json& errors, const std::string& path) {
  return described::read_document<ReportJson, std::vector<ErrorRecord>>(errors, path);
}

std::vector<described::SchemaShape> report_json_shapes() {
  return {{.schema = "common",
           .pointer = "/$defs/error_record",
           .shape = described::shape<ReportJson, ErrorRecord>(),
           .extra_keys = {"errno_name"}}};
}

namespace {

// What the report's "outcome" says: the run's, unless a section names a more precise cause.
std::string outcome_text(const Report& r) {
  std::optional<std::string> cause;
  for (const auto& section : r.sections) {
    auto named = section->outcome();
    if (!named) continue;
    if (cause) throw std::logic_error("two report sections name the outcome");
    cause = std::move(named);
  }
  return cause ? *cause : std::string(to_string(r.outcome));
}

// "  cm: connect 1.000 ms ...", the report's CM steps (or its others), or "" when it has none.
std::string timings_line(const Report& r, std::string_view label, bool cm) {
  std::string line;
  for (const auto& [step, ms] : r.timings) {
    if (is_cm_step(step) == cm) line += fmt::format(" {} {:.3f} ms", step_name(step), ms);
  }
  return line.empty() ? line : fmt::format("  {}:{}\n", label, line);
}

}  // namespace

nlohmann::json to_json(const Report& r) {
  nlohmann::json errors = nlohmann::json::array();
  for (const auto& e : r.errors) {
    errors.push_back(to_json(e));
  }
  nlohmann::json doc = {
      {"schema_version", report_schema_version},
      {"tool", r.tool},
      {"role", r.role},
      {"arguments", r.arguments},
      {"outcome", outcome_text(r)},
      {"exit_code", static_cast<int>(r.exit_code)},
  };
  if (r.groups.connection) {
    nlohmann::json cm = nlohmann::json::object();
    nlohmann::json other = nlohmann::json::object();
    for (const auto& [step, ms] : r.timings) {
      (is_cm_step(step) ? cm : other)[std::string(step_name(step))] = ms;
    }
    doc["local_address"] = r.local_address;
    doc["peer_address"] = r.peer_address;
    doc["cm_timings_ms"] = std::move(cm);
    doc["timings_ms"] = std::move(other);
  }
  if (r.groups.measurement) {
    doc["iterations"] = {{"requested", r.iterations_requested}, {"completed", r.iterations_completed}};
    doc["bytes"] = r.bytes;
    doc["rtt_us"] = r.rtt ? to_json(*r.rtt) : nlohmann::json(nullptr);
  }
  doc["duration_s"] = r.duration_s;
  doc["errors"] = std::move(errors);
  for (const auto& section : r.sections) {
    nlohmann::json keys = nlohmann::json::object();
    section->add_to(keys);
    for (auto item = keys.begin(); item != keys.end(); ++item) {
      // A tool's section must not replace what every report means the same way, nor
      // another section's result.
      if (doc.contains(item.key())) {
        throw std::logic_error("report section '" + item.key() + "' would overwrite a key");
      }
      doc[item.key()] = std::move(item.value());
    }
  }
  return doc;
}

std::string json_text(const nlohmann::json& document) {
  // dump()'s default handler throws on invalid UTF-8, which aborted a tool printing a report
  // that held a peer's bytes; `replace` writes them as U+FFFD in the same single pass.
  return document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string json_line(const nlohmann::json& document) {
  return document.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

// The tool's own text, else the generic summary.
std::string summary_text(const Report& r) {
  std::string own;
  for (const auto& section : r.sections) {
    own += section->text();
  }
  if (!own.empty()) {
    return own;
  }
  std::ostringstream out;
  // The text says what the JSON says: a group the tool does not have is not printed as zeros.
  const bool connection = r.groups.connection;
  const bool measurement = r.groups.measurement;
  std::string did;
  if (measurement) {
    const std::string requested = r.iterations_requested == 0 ? "unlimited" : std::to_string(r.iterations_requested);
    did = fmt::format("{} of {} iterations, {} bytes in ", r.iterations_completed, requested, r.bytes);
  }
  // Named as installed (rdmakit-rping where the package put it); a tool with no role
  // (diag-bind) is named alone: "diag-bind: ...", not "diag-bind : ...".
  out << fmt::format("{}{}{}: {}{:.3f} s, {}\n", r.siblings(r.tool), r.role.empty() ? "" : " " + r.role,
                     !connection || r.peer_address.empty() ? "" : " peer " + r.peer_address, did, r.duration_s,
                     outcome_text(r));
  if (connection) {
    out << timings_line(r, "cm", true) << timings_line(r, "steps", false);
  }
  if (measurement && r.rtt) {
    const auto& s = *r.rtt;
    out << fmt::format("  rtt us: min {:.2f} avg {:.2f} p50 {:.2f} p99 {:.2f} p99.9 {:.2f} max {:.2f} ({} samples)\n",
                       s.min_us, s.avg_us, s.p50_us, s.p99_us, s.p999_us, s.max_us, s.count);
  }
  return out.str();
}

}  // namespace

std::string render_text(const Report& r) {
  // Even a tool's own text (an empty table, a summary of nothing): the error line on stderr
  // says it all.
  if (r.outcome == Outcome::usage_error) {
    return {};
  }
  auto text = summary_text(r);
  for (const auto& section : r.sections) {
    text += section->note();
  }
  return text;
}

}  // namespace rdmakit
