#pragma once
// The result of one tool run, filled in as the run goes so that an error or Ctrl-C still
// leaves a partial report. Rendered in exactly one place: text for people, JSON for scripts.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/core/error.hpp"
#include "lib/core/stats.hpp"

namespace rdmakit {

inline constexpr int report_schema_version = 1;

struct ErrorRecord {
  std::string message;  // one line, as printed
  std::string call;     // failing library call, "" for non-call errors
  int errnum = 0;       // 0 when not an errno error
  std::string hint;
  std::optional<CompletionStatus> completion;  // a failed work completion's status
};

struct Report {
  std::string tool;
  std::string role;  // "client", "server", "" when not applicable
  nlohmann::json arguments = nlohmann::json::object();
  std::string outcome =
      "completed";  // completed | interrupted | peer_disconnected | timed_out | failed | usage_error | unsupported
  ExitCode exit_code = ExitCode::ok;
  std::string local_address;
  std::string peer_address;
  // CM steps in the order they happened, in milliseconds.
  std::vector<std::pair<std::string, double>> cm_timings_ms;
  std::uint64_t iterations_requested = 0;  // 0 = unlimited
  std::uint64_t iterations_completed = 0;
  std::uint64_t bytes = 0;  // payload bytes moved by RDMA operations
  std::optional<LatencySummary> rtt;
  double duration_s = 0;
  std::vector<ErrorRecord> errors;
  // Tool-specific sections (e.g. per-connection results of a persistent server).
  nlohmann::json extra = nlohmann::json::object();
  // Tool-specific human output; when set it replaces the generic text summary.
  std::string text;

  void add_timing(std::string step, double ms) { cm_timings_ms.emplace_back(std::move(step), ms); }
  void fail(ErrorRecord error, ExitCode code = ExitCode::run_failed);
  void stop(StopReason reason, const std::string& detail);
};

// Times consecutive steps of a run into a report's cm_timings_ms: each lap() records the
// time since the previous lap (or restart()).
class StepTimer {
 public:
  explicit StepTimer(Report& report) : report_(report), since_(std::chrono::steady_clock::now()) {}
  void lap(std::string step);
  void restart() { since_ = std::chrono::steady_clock::now(); }

 private:
  Report& report_;
  std::chrono::steady_clock::time_point since_;
};

ErrorRecord record_of(const RdmaError& error);
ErrorRecord record_of(const CompletionError& error);

// The report as a document. Its strings hold whatever bytes a user, a peer or sysfs supplied,
// so it may not be valid UTF-8: print it with json_text(), never with dump().
nlohmann::json to_json(const Report& report);
nlohmann::json to_json(const ErrorRecord& error);
nlohmann::json to_json(const LatencySummary& summary);
// A document's text as the tools print and write it (indented by 2), always valid JSON:
// bytes that are not UTF-8 come out as U+FFFD, everything else unchanged.
std::string json_text(const nlohmann::json& document);
std::string render_text(const Report& report);

// "ENODEV" for 19; "E?" when unknown.
std::string errno_name(int errnum);

}  // namespace rdmakit
