#include "lib/tool/cli.hpp"

#include <signal.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "lib/base/log.hpp"
#include "lib/tool/attached_diagnosis.hpp"
#include "lib/tool/cli_checks.hpp"
#include "lib/tool/report_output.hpp"
#include "lib/tool/run_outcome.hpp"
#include "lib/tool/shell_completion.hpp"

namespace rdmakit {

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
  run_guarded(report, body, [&](const RdmaError& error) { diagnose_failure(error, report); });
  const ReportOutput output({.json = common_.json,
                             .json_lines = json_lines_,
                             .json_file = json_file_,
                             .speaker = speaker(),
                             .prints_report = prints_report()});
  output.write_json_file(report);
  output.render(report, diagnosis_text_);
  return output.delivered(report.exit_code);
}

}  // namespace rdmakit
