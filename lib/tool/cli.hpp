#pragma once
// Options every tool shares, and the one guarded entry point that parses them, runs the
// tool body, renders its report (text or JSON) and maps errors to exit codes.

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
#include "lib/net/peer_gate.hpp"
#include "lib/tool/job.hpp"
#include "lib/tool/option_walk.hpp"
#include "lib/tool/program_names.hpp"

namespace rdmakit {

struct CommonOptions {
  bool json = false;
  double timeout_s = 5.0;  // bound on every wait for the peer or the fabric
  bool debug = false;
  std::string log_level = "warn";

  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000.0));
  }
  // Adds --json, --timeout, --log-level; `debug_flag` ("-d" or "") names the short debug flag.
  void add_to(CLI::App& app, const std::string& debug_flag = "-d");
  // Throws UsageError when the values are out of range.
  void check() const;
};

// The gate of a server whose every connection is a client of its own (rping, rdma_server):
// --max-per-peer as well, so that one host cannot take every slot.
inline constexpr GateFlags per_client_gate{.local_default = false, .cap = true, .rate = true, .per_peer = true};

// The flags of a tool that serves clients, spelled as stock rping spells them:
// -P/--persistent and --accept-timeout, and who it serves (--allow, --max-clients,
// --peer-rate, and where the tool takes it --max-per-peer: any peer by default, as the stock
// servers do, at most 64 at once). Where the server listens stays each tool's own flag
// (rping -a, rdma_server -s, send_bw --bind), as their stock namesakes have it.
struct ServerOptions {
  bool persistent = false;
  double accept_timeout_s = 0;  // 0: wait forever
  GateOptions peers{.allow = {}, .max_clients = 64, .peer_rate = 0, .max_per_peer = {}};
  GateFlags gate;  // which of the gate's flags this tool offers (add_to's)

  // `persistent_help` and `accept_timeout_help` say what the two flags do in this tool.
  void add_to(CLI::App& app, const std::string& persistent_help, const std::string& accept_timeout_help,
              GateFlags flags = {});
  // The gate of this server listening on `bind`.
  GateLimits gate_limits(const std::string& bind) const { return peers.limits(bind, gate); }
  // The wait for a client, none for 0.
  std::optional<std::chrono::milliseconds> accept_timeout() const;
};

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
  std::string report_json(const Report& report) const;
  // The report to --json-file, whole or not at all; a failure is added to it (exit 1 where it
  // was 0), so that stdout and stderr say it.
  void write_json_file(Report& report) const;
  void render(const Report& report) const;
  // The exit status once standard output has taken the report: `code`, or 1 for a run that
  // went well when it could not (a reader that went away), which is said on stderr.
  int delivered(ExitCode code) const;
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
