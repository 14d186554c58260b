#include "lib/tool/cli.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "lib/base/child_process.hpp"
#include "lib/base/log.hpp"
#include "lib/base/text_file.hpp"
#include "lib/tool/attached_diagnosis.hpp"
#include "lib/tool/cli_checks.hpp"
#include "lib/tool/shell_completion.hpp"

namespace rdmakit {

FiniteNumber::FiniteNumber() : CLI::Validator("") {
  func_ = [](std::string& text) {
    // Read as CLI11 reads a double (strtold), wide enough that "1e400" is a finite long double
    // to be refused here, before anything converts it to a double.
    long double value = 0;
    if (!CLI::detail::lexical_cast(text, value)) {
      return std::string();
    }
    const bool finite = std::isfinite(value) && std::fabs(value) <= std::numeric_limits<double>::max();
    return finite ? std::string() : "'" + text + "' is not a finite number";
  };
}

WritableFile::WritableFile() : CLI::Validator("FILE") {
  func_ = [](const std::string& text) {
    namespace fs = std::filesystem;
    std::error_code error;
    const fs::path file(text);
    if (fs::is_directory(file, error)) return "'" + text + "' is a directory";
    if (fs::exists(file, error)) {
      return ::access(text.c_str(), W_OK) == 0 ? std::string()
                                               : "'" + text + "' cannot be written: " + std::strerror(errno);
    }
    const auto folder = file.has_parent_path() ? file.parent_path() : fs::path(".");
    if (!fs::is_directory(folder, error)) return "'" + text + "': no folder " + folder.string();
    return ::access(folder.c_str(), W_OK | X_OK) == 0
               ? std::string()
               : "'" + text + "': folder " + folder.string() + " cannot be written to: " + std::strerror(errno);
  };
}

void CommonOptions::add_to(CLI::App& app, const std::string& debug_flag) {
  app.add_flag("--json", json, "Print one JSON report on stdout instead of text");
  app.add_option("--timeout", timeout_s, "Seconds to wait for any single CM event or completion")
      ->capture_default_str()
      ->check(FiniteNumber());
  const std::string debug_names = debug_flag.empty() ? "--debug" : debug_flag + ",--debug";
  app.add_flag(debug_names, debug, "Debug logging on stderr (same as --log-level debug)");
  // The set in the description is what help and shell completion show; the check itself is
  // parse_log_level's, so the spellings spdlog also takes ("warning", "err") keep working.
  const CLI::Validator known_level(
      [](std::string& name) {
        return parse_log_level(name) ? std::string()
                                     : "'" + name + "' is not one of trace, debug, info, warn, error, critical, off";
      },
      "{trace,debug,info,warn,error,critical,off}");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical or off")
      ->capture_default_str()
      ->check(known_level);
}

void CommonOptions::check() const {
  if (!(timeout_s > 0.0 && timeout_s <= 3600.0)) {
    throw UsageError("--timeout must be between 0 and 3600 seconds");
  }
  if (!parse_log_level(log_level)) {
    throw UsageError("--log-level '" + log_level + "' is not one of trace, debug, info, warn, error, critical, off");
  }
}

void ServerOptions::add_to(CLI::App& app, const std::string& persistent_help, const std::string& accept_timeout_help,
                           GateFlags flags) {
  gate = flags;
  app.add_option("--accept-timeout", accept_timeout_s, accept_timeout_help)
      ->capture_default_str()
      ->check(FiniteNumber())
      ->check(CLI::Range(0.0, 86400.0));
  app.add_flag("-P,--persistent", persistent, persistent_help);
  peers.add_to(app, gate);
}

std::optional<std::chrono::milliseconds> ServerOptions::accept_timeout() const {
  if (accept_timeout_s <= 0) {
    return std::nullopt;
  }
  return std::chrono::milliseconds(static_cast<long long>(accept_timeout_s * 1000.0));
}

ToolRunner::ToolRunner(std::string name, std::string description, const std::string& debug_flag)
    : names_(std::move(name)), app_(std::make_unique<CLI::App>(std::move(description), names_.tool())) {
  app_->set_version_flag("--version", std::string(names_.tool() + " (rdmakit) 0.1.0"));
  common_.add_to(*app_, debug_flag);
}

ToolRunner::~ToolRunner() = default;

void ToolRunner::footer(const std::string& text) {
  app_->footer(text);
}

void ToolRunner::rename_argument(const std::string& long_name, std::string key) {
  argument_keys_[long_name] = std::move(key);
}

void ToolRunner::enable_json_file(const std::string& aliases) {
  app_->add_option("--json-file" + aliases, json_file_, "Also write the JSON report to this file")
      ->type_name("FILE")
      ->check(WritableFile());
}

void ToolRunner::enable_diagnose() {
  app_->add_flag("--diagnose", diagnose_,
                 "On an address, device or connection failure, run diag-bind's or diag-connect's diagnosis (by "
                 "diag-bind installed beside this program)");
}

void ToolRunner::diagnose_failure(const RdmaError& error, Report& report) {
  if (!diagnose_ || !(explained_by_diag_bind(error.call(), error.errnum()) || explained_by_diag_connect(error))) {
    return;
  }
  auto outcome = ask_attached_diagnosis(names_.sibling_path("diag-bind"),
                                        DiagnosisRequest{.error = error, .timeout = common_.timeout()});
  if (!outcome.answer) {
    diagnosis_text_ = "diagnosis failed: " + outcome.failure + "\n";
    return;
  }
  report.add(AttachedDiagnosis(std::move(outcome.answer->diagnosis)));
  diagnosis_text_ = std::move(outcome.answer->text);
}

namespace {

// Whether user space can reach any RDMA device: each has a uverbsN entry in
// infiniband_verbs once ib_uverbs serves it. Without one, an ENODEV from whichever call a tool makes first
// (rdma_getaddrinfo in rdma_server) means the run could not start here at all: exit 77.
bool verbs_device_present() {
  std::error_code error;
  // Beside the uverbsN entries the folder holds abi_version, with or without a device.
  for (std::filesystem::directory_iterator entry("/sys/class/infiniband_verbs", error), end; !error && entry != end;
       entry.increment(error)) {
    if (entry->path().filename().string().starts_with("uverbs")) return true;
  }
  return false;
}

// 77 where the run could not start here at all, 1 for any other failed call.
ExitCode exit_code_for(const RdmaError& error) {
  const bool channel_refused =
      error.call() == "rdma_create_event_channel" && (error.errnum() == ENODEV || error.errnum() == ENOENT);
  return channel_refused || !verbs_device_present() ? ExitCode::no_device : ExitCode::run_failed;
}

// The exit code for a run that ended "interrupted": the stop signals stay blocked and
// pending (lib/wait reads them through a signalfd without consuming them), so the pending
// set says which one arrived. SIGTERM wins over SIGHUP, SIGHUP over SIGINT.
ExitCode stop_signal_exit_code() {
  sigset_t pending;
  sigemptyset(&pending);
  if (sigpending(&pending) != 0) return ExitCode::interrupted;
  if (sigismember(&pending, SIGTERM) == 1) return ExitCode::terminated;
  if (sigismember(&pending, SIGHUP) == 1) return ExitCode::hung_up;
  return ExitCode::interrupted;
}

// The program name asked for by --bash-completion[=NAME] anywhere before "--". Without NAME:
// the name this process was started under, which is the installed one, packager's prefix
// included. Only the '=' form takes a name, so a positional argument is never mistaken for one.
std::optional<std::string> completion_request(int argc, char** argv, const std::string& fallback) {
  constexpr std::string_view flag = "--bash-completion";
  std::string started_as = argc > 0 ? std::filesystem::path(argv[0]).filename().string() : fallback;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") {
      break;
    }
    if (arg == flag) {
      return started_as;
    }
    if (arg.starts_with(flag) && arg[flag.size()] == '=') {
      const auto name = arg.substr(flag.size() + 1);
      return name.empty() ? started_as : std::string(name);
    }
  }
  return std::nullopt;
}

// CLI11 2.1 lists the arguments it did not expect last first; a user reads them in the
// order typed, so they are put back in the command line's order.
std::string unexpected_arguments(int argc, char** argv, std::vector<std::string> unexpected) {
  std::vector<std::string> in_order;
  for (int i = 1; i < argc && !unexpected.empty(); ++i) {
    const auto found = std::find(unexpected.begin(), unexpected.end(), argv[i]);
    if (found == unexpected.end()) continue;
    in_order.push_back(*found);
    unexpected.erase(found);
  }
  in_order.insert(in_order.end(), unexpected.begin(), unexpected.end());
  return fmt::format("{} not expected: {}", in_order.size() > 1 ? "these arguments were" : "this argument was",
                     fmt::join(in_order, " "));
}

}  // namespace

std::string ToolRunner::speaker() const {
  return job_ == nullptr ? names_.invoked() : fmt::format("{}[{}]", names_.invoked(), job_->rank());
}

void ToolRunner::take_invoked_name(int argc, char** argv) {
  if (argc < 1) return;
  names_.take_invoked(argv[0]);
  app_->name(names_.invoked());
  app_->set_version_flag("--version", names_.invoked() + " (rdmakit) 0.1.0");
}

std::optional<std::string> ToolRunner::agree_on_options(std::optional<std::string> refusal) {
  const auto refusals = job_->all_gather(refusal.value_or(""));
  if (refusal) return refusal;
  for (std::size_t rank = 0; rank < refusals.size(); ++rank) {
    if (!refusals[rank].empty()) return fmt::format("rank {} refused its options: {}", rank, refusals[rank]);
  }
  return std::nullopt;
}

int ToolRunner::usage_error(const std::string& message) {
  // One line, so scripts and people see what is wrong without scrolling past help text.
  // One write: the processes of a job share a terminal, and unbuffered pieces interleave.
  std::cerr << fmt::format("{}: {} (see '{} --help')\n", speaker(), message, names_.invoked()) << std::flush;
  if (common_.json && prints_report()) {
    Report report;
    report.tool = names_.tool();
    report.groups = groups_;
    report.fail(ErrorRecord{.message = message, .call = {}, .errnum = 0, .hint = {}, .completion = {}},
                ExitCode::usage);
    std::cout << json_text(to_json(report)) << '\n' << std::flush;
  }
  return static_cast<int>(ExitCode::usage);
}

void ToolRunner::json_lines() {
  json_lines_ = true;
  app_->get_option("--json")->description("Write JSON lines on stdout as the run goes, its report as the last one");
}

std::string ToolRunner::report_json(const Report& report) const {
  const auto document = to_json(report);
  return json_lines_ ? json_line(document) : json_text(document);
}

void ToolRunner::write_json_file(Report& report) const {
  if (json_file_.empty() || !prints_report()) return;
  const auto failed = write_file_whole(json_file_, report_json(report) + "\n");
  if (!failed) return;
  report.fail_afterwards(ErrorRecord{.message = *failed, .call = {}, .errnum = 0, .hint = {}, .completion = {}});
}

void ToolRunner::render(const Report& report) const {
  for (const auto& error : report.errors) {
    auto lines = fmt::format("{}: {}\n", speaker(), error.message);
    if (!error.hint.empty()) lines += fmt::format("{}: hint: {}\n", speaker(), error.hint);
    std::cerr << lines << std::flush;
  }
  // diag-bind's own words: it ran under the name installed beside this program.
  std::cerr << diagnosis_text_;
  if (!prints_report()) return;
  if (common_.json) {
    std::cout << report_json(report) << '\n' << std::flush;
  } else {
    std::cout << render_text(report) << std::flush;
  }
}

int ToolRunner::delivered(ExitCode code) const {
  std::cout.flush();
  if (!std::cout.fail()) return static_cast<int>(code);
  // A reader that went away (| head): said once, and a run that went well fails, as the
  // report was not delivered (the --json-file one, if any, was).
  const int errnum = errno;
  const char* why = errnum == EPIPE ? "the reader closed it (EPIPE)"
                    : errnum == 0   ? "it failed"
                                    : std::strerror(errnum);
  std::cerr << fmt::format("{}: cannot write the report to standard output: {}\n", speaker(), why) << std::flush;
  return static_cast<int>(code == ExitCode::ok ? ExitCode::run_failed : code);
}

int ToolRunner::run(int argc, char** argv, const std::function<void()>& validate,
                    const std::function<void(Report&)>& body) {
  take_invoked_name(argc, argv);
  // A closed standard output or socket is an error to report (EPIPE), not a signal that ends
  // the process with no report; the programs rdma_smoke starts get the default back.
  signal(SIGPIPE, SIG_IGN);
  // Looked for before parsing: the build generates completions by running each tool, and
  // that must work whatever else the command line would require or refuse.
  if (const auto program = completion_request(argc, argv, names_.tool())) {
    try {
      std::cout << bash_completion(*app_, *program) << std::flush;
    } catch (const std::invalid_argument& error) {
      return usage_error(std::string("--bash-completion: ") + error.what());
    }
    return static_cast<int>(ExitCode::ok);
  }
  std::optional<std::string> refusal;
  try {
    app_->parse(argc, argv);
  } catch (const CLI::Success& done) {
    return app_->exit(done);  // --help, --version
  } catch (const CLI::ExtrasError&) {
    refusal = unexpected_arguments(argc, argv, app_->remaining());
  } catch (const CLI::ParseError& error) {
    refusal = error.what();
  }
  if (!refusal) {
    try {
      common_.check();
      validate();
    } catch (const UsageError& error) {
      refusal = error.what();
    }
  }
  if (job_ != nullptr) {
    job_->join();
    refusal = agree_on_options(std::move(refusal));
  }
  if (refusal) return usage_error(*refusal);
  auto level = *parse_log_level(common_.log_level);
  if (common_.debug && level > spdlog::level::debug) {
    level = spdlog::level::debug;
  }
  setup_logging(speaker(), level);

  Report report;
  report.tool = names_.tool();
  report.siblings = names_.siblings();
  report.groups = groups_;
  report.arguments = arguments_of(*app_, argument_keys_);
  const auto started = std::chrono::steady_clock::now();
  try {
    body(report);
  } catch (const RdmaError& error) {
    report.fail(record_of(error, report.siblings), exit_code_for(error));
    diagnose_failure(error, report);
  } catch (const RunStopped& stopped) {
    report.stop(stopped.reason(), stopped.what());
  } catch (const CompletionError& error) {
    report.fail(record_of(error));
  } catch (const UsageError& error) {
    report.fail(ErrorRecord{.message = error.what(), .call = {}, .errnum = 0, .hint = {}, .completion = {}},
                ExitCode::usage);
  } catch (const Unsupported& error) {
    report.fail(ErrorRecord{.message = error.what(), .call = {}, .errnum = 0, .hint = {}, .completion = {}},
                ExitCode::no_device);
    report.outcome = Outcome::unsupported;
  } catch (const std::exception& error) {
    report.fail(ErrorRecord{.message = error.what(), .call = {}, .errnum = 0, .hint = {}, .completion = {}});
  }
  if (report.outcome == Outcome::interrupted) {
    report.exit_code = stop_signal_exit_code();
  }
  report.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  write_json_file(report);
  render(report);
  return delivered(report.exit_code);
}

}  // namespace rdmakit
