#pragma once
// Where a tool's report goes once its run has ended: --json-file (whole or not at all), the
// error and hint lines on stderr, the report on stdout (text, one JSON document, or the last
// of its JSON lines), and the exit status once stdout has taken it.

#include <string>

#include "lib/base/report.hpp"

namespace rdmakit {

struct ReportOutputSettings {
  bool json = false;          // --json: the report as JSON on stdout
  bool json_lines = false;    // a tool that streams JSON lines: the report is one more line
  std::string json_file;      // --json-file, "" for none
  std::string speaker;        // what the stderr lines begin with: the program as invoked ("rdma_mesh[3]")
  bool prints_report = true;  // false on a job's processes but rank 0: their errors only
};

class ReportOutput {
 public:
  explicit ReportOutput(ReportOutputSettings settings) : settings_(std::move(settings)) {}

  // The report to --json-file, whole or not at all; a failure is added to it (exit 1 where it
  // was 0), so that stdout and stderr say it.
  void write_json_file(Report& report) const;
  // The errors and hints on stderr, then `diagnosis` (diag-bind's words for --diagnose), then
  // the report on stdout.
  void render(const Report& report, const std::string& diagnosis) const;
  // The exit status once standard output has taken the report: `code`, or 1 for a run that
  // went well when it could not (a reader that went away), which is said on stderr.
  int delivered(ExitCode code) const;

 private:
  std::string report_json(const Report& report) const;

  ReportOutputSettings settings_;
};

}  // namespace rdmakit
