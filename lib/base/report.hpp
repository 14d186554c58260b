#pragma once
// The result of one tool run, filled in as the run goes so that an error or Ctrl-C still
// leaves a partial report. Rendered in exactly one place: text for people, JSON for scripts.

#include <array>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/error.hpp"
#include "lib/base/sibling_names.hpp"
#include "lib/base/stats.hpp"
#include "lib/base/stats_json.hpp"
#include "lib/base/step.hpp"

namespace rdmakit {

inline constexpr int report_schema_version = 4;

struct ErrorRecord {
  std::string message;  // one line, as printed
  std::string call;     // failing library call, "" for non-call errors
  int errnum = 0;       // 0 when not an errno error
  std::string hint;
  std::optional<CompletionStatus> completion;  // a failed work completion's status
};

// How a run ended, as the report's "outcome" says it. outcome_names, in the enum's order, is
// the one table of the names: what the reports write and what a peer's or a file's name is
// read against; the schemas and rdmakit(7) are held to it (tests/unit/outcome_test.cpp).
enum class Outcome { completed, interrupted, peer_disconnected, timed_out, failed, usage_error, unsupported };
inline constexpr std::array<std::string_view, 7> outcome_names{
    "completed", "interrupted", "peer_disconnected", "timed_out", "failed", "usage_error", "unsupported"};
std::string_view to_string(Outcome outcome);
// The outcome NAME names; nullopt for a name outside the table.
std::optional<Outcome> outcome_named(std::string_view name);
Outcome outcome_of(StopReason reason);

// A tool's own result in its report (a connection group's table, send_bw's rows, a
// diagnosis): one type per kind of result, which alone knows its JSON and its text.
class ReportSection {
 public:
  ReportSection() = default;
  ReportSection(const ReportSection&) = default;
  ReportSection(ReportSection&&) = default;
  ReportSection& operator=(const ReportSection&) = default;
  ReportSection& operator=(ReportSection&&) = default;
  virtual ~ReportSection() = default;

  // Writes this section's keys into `document`, a fresh object that to_json(Report) then
  // merges beside the common keys.
  virtual void add_to(nlohmann::json& document) const = 0;
  // The tool's human output; "" leaves the generic summary.
  virtual std::string text() const { return {}; }
  // Lines written after the text, whichever it is (the tool's own or the generic summary):
  // a count beside the results, as the refused peers of a server.
  virtual std::string note() const { return {}; }
  // A cause more precise than Outcome says (diag-bind's verdict), written as the
  // report's "outcome"; none leaves the report's own.
  virtual std::optional<std::string> outcome() const { return std::nullopt; }
};

// A single value one tool reports beside the common keys (ucmatose's migrate_ms,
// rdma_server's inline_send), named where the tool adds it.
template <typename T>
class NamedValue final : public ReportSection {
 public:
  NamedValue(std::string key, T value) : key_(std::move(key)), value_(std::move(value)) {}
  void add_to(nlohmann::json& document) const override;

 private:
  std::string key_;
  T value_;
};

// The in-process diagnosis of another tool's --diagnose, under "diagnosis". It arrives as
// JSON because this layer cannot know the diagnoser's model (ToolRunner::Diagnoser).
class AttachedDiagnosis final : public ReportSection {
 public:
  explicit AttachedDiagnosis(nlohmann::json diagnosis) : diagnosis_(std::move(diagnosis)) {}
  void add_to(nlohmann::json& document) const override { document["diagnosis"] = diagnosis_; }

 private:
  nlohmann::json diagnosis_;
};

// The common keys beyond those every report has (schema_version, tool, role, arguments,
// outcome, exit_code, duration_s, errors). A tool has a group only where its keys mean
// something for it, declares it once (ToolRunner::report_groups), and its schema requires
// exactly the groups it has.
struct ReportGroups {
  bool connection = true;   // local_address, peer_address, cm_timings_ms, timings_ms
  bool measurement = true;  // iterations, bytes, rtt_us
};

struct Report {
  std::string tool;
  // How this run's hints name the suite's other programs (rdmakit-diag-bind where the package
  // installed them so): not written, used where a hint is built from the report's run.
  SiblingNames siblings;
  std::string role;  // "client", "server", "" when not applicable
  nlohmann::json arguments = nlohmann::json::object();
  ReportGroups groups;  // which of the keys below the report carries
  Outcome outcome = Outcome::completed;
  ExitCode exit_code = ExitCode::ok;
  std::string local_address;
  std::string peer_address;
  // Timed steps in the order they happened, in milliseconds; JSON writes the CM steps as
  // cm_timings_ms and the others as timings_ms.
  std::vector<std::pair<Step, double>> timings;
  std::uint64_t iterations_requested = 0;  // 0 = unlimited
  std::uint64_t iterations_completed = 0;
  std::uint64_t bytes = 0;  // payload bytes moved by RDMA operations
  std::optional<LatencySummary> rtt;
  double duration_s = 0;
  std::vector<ErrorRecord> errors;
  // The tool's own results, in the order added. Their keys may not repeat a common key or
  // one another's; their text, when any has some, replaces the generic summary.
  std::vector<std::shared_ptr<const ReportSection>> sections;

  void add_timing(Step step, double ms) { timings.emplace_back(step, ms); }
  void add_timing(const StepSpan& span) { timings.emplace_back(span.step, span.ms()); }
  // The steps a part of the run finished, added as they come (add_timing).
  StepEvents step_events() {
    return [this](const StepSpan& span) { add_timing(span); };
  }
  template <std::derived_from<ReportSection> Section>
  void add(Section section) {
    sections.push_back(std::make_shared<const Section>(std::move(section)));
  }
  void fail(ErrorRecord error, ExitCode code = ExitCode::run_failed);
  // A failure after the run itself (its report not kept): a run that went well fails with
  // it; one that already failed keeps its outcome and exit code, and lists it too.
  void fail_afterwards(ErrorRecord error);
  void stop(StopReason reason, const std::string& detail);
};

// The record of a failed call; its hint names siblings as `siblings` has them.
ErrorRecord record_of(const RdmaError& error, const SiblingNames& siblings);
ErrorRecord record_of(const CompletionError& error);

// The report as a document. Its strings hold whatever bytes a user, a peer or sysfs supplied,
// so it may not be valid UTF-8: print it with json_text(), never with dump().
nlohmann::json to_json(const Report& report);
nlohmann::json to_json(const ErrorRecord& error);
// A report's "errors", as a report wrote them (rdma_smoke reads its tools'); ProtocolError
// naming the first thing wrong at `path`.
std::vector<ErrorRecord> error_records_from_json(const nlohmann::json& errors, const std::string& path);
// The error record's shape and its schema definition (tests/unit/described_json_test.cpp).
std::vector<described::SchemaShape> report_json_shapes();
// A document's text as the tools print and write it (indented by 2), always valid JSON:
// bytes that are not UTF-8 come out as U+FFFD, everything else unchanged.
std::string json_text(const nlohmann::json& document);
// The same on one line, for tools that write a stream of JSON lines.
std::string json_line(const nlohmann::json& document);
std::string render_text(const Report& report);

// "ENODEV" for 19; "E?" when unknown.
std::string errno_name(int errnum);

template <typename T>
void NamedValue<T>::add_to(nlohmann::json& document) const {
  if constexpr (std::is_same_v<T, LatencySummary>) {
    document[key_] = to_json(value_);
  } else {
    document[key_] = value_;
  }
}

}  // namespace rdmakit
