#pragma once
// The one entry point of every tool: it declares the shared options (common_options.hpp),
// parses argv, runs the tool's body guarded (run_outcome.hpp) and hands its report to
// report_output.hpp; --diagnose and the job a tool's processes share are its options too.

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lib/base/cli_declarations.hpp"
#include "lib/base/report.hpp"
#include "lib/tool/common_options.hpp"
#include "lib/tool/job.hpp"
#include "lib/tool/option_walk.hpp"
#include "lib/tool/program_names.hpp"

namespace rdmakit {

class ToolRunner {
 public:
  // `debug_flag` is the short name of --debug ("" for tools whose stock -d means a device).
  ToolRunner(std::string name, std::string description, const std::string& debug_flag = "-d");
  // Out of line: CLI::App is only declared here (lib/base/cli_declarations.hpp).
  ~ToolRunner();
  ToolRunner(const ToolRunner&) = delete;
  ToolRunner& operator=(const ToolRunner&) = delete;

  // Adds --diagnose: when a failure is one diag-bind or diag-connect explains, diag-bind
  // installed beside this program diagnoses it (lib/tool/attached_diagnosis.hpp), and the
  // diagnosis lands in the report ("diagnosis") and on stderr.
  void enable_diagnose();

  // Adds --json-file FILE: the JSON report is also written there, on failure too.
  // `aliases`: more names for it, in CLI11's form (",--out_json_file").
  void enable_json_file(const std::string& aliases = "");
  // The file the report goes to when --json-file named none (perftest's --out_json).
  void default_json_file(std::string path) {
    if (json_file_.empty()) json_file_ = std::move(path);
  }
  // The --json-file path, "" when none was given (a tool that rewrites it as it goes).
  const std::string& json_file() const { return json_file_; }

  // Runs this process as one of a job's (rdma_mesh under mpirun): run() joins the job once
  // the command line is parsed; a usage error on any process ends every process with exit
  // 2 and one line; only rank 0 prints the report, the others their errors.
  void join_job(Job& job) { job_ = &job; }

  // The text --help ends with (the tool's exit statuses).
  void footer(const std::string& text);

  // The report's "arguments" key for an option whose long name is not that key
  // (ToolRunner fills report.arguments from the options; see arguments_of).
  void rename_argument(const std::string& long_name, std::string key);

  // The common key groups this tool's report carries (all by default), its usage errors'
  // included; see ReportGroups.
  void report_groups(ReportGroups groups) { groups_ = groups; }

  // A tool whose --json output is a stream of JSON lines as it runs (rdma_pingmesh): its
  // report comes last, as one more line.
  void json_lines();

  CLI::App& app() { return *app_; }
  const CommonOptions& common() const { return common_; }
  // What this program is called and its siblings are: known once run() has begun (in
  // `validate` and `body`).
  const ProgramNames& names() const { return names_; }

  // Parses argv, calls `validate` (may throw UsageError), sets up logging, calls `body`
  // with a report to fill in (its tool and arguments already set), then renders it. Returns the process exit code.
  // `--bash-completion[=NAME]` instead prints a bash completion script for this tool's
  // options, registered for the command NAME (default: argv[0]'s file name), and returns 0
  // before anything else runs. It is not a CLI11 option, so --help does not list it.
  int run(int argc, char** argv, const std::function<void()>& validate, const std::function<void(Report&)>& body);

 private:
  int usage_error(const std::string& message);
  // With a job: every process's refusal of its options ("" for none) decides each one's.
  std::optional<std::string> agree_on_options(std::optional<std::string> refusal);
  // The tool's name, with the rank in a job: "rdma_mesh[3]".
  std::string speaker() const;
  // names_ from argv[0] (the usage line and --version name the program so).
  void take_invoked_name(int argc, char** argv);
  bool prints_report() const { return job_ == nullptr || job_->rank() == 0; }
  void diagnose_failure(const RdmaError& error, Report& report);

  ProgramNames names_;
  std::unique_ptr<CLI::App> app_;
  CommonOptions common_;
  bool diagnose_ = false;  // --diagnose was given (only enable_diagnose() adds it)
  std::string diagnosis_text_;
  std::string json_file_;
  Job* job_ = nullptr;
  ReportGroups groups_;
  bool json_lines_ = false;
  ArgumentKeys argument_keys_{{"timeout", "timeout_s"}};
};

}  // namespace rdmakit
