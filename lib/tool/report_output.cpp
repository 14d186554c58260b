#include "lib/tool/report_output.hpp"

#include <cerrno>
#include <cstring>
#include <iostream>

#include <fmt/format.h>

#include "lib/base/text_file.hpp"

namespace rdmakit {

std::string ReportOutput::report_json(const Report& report) const {
  const auto document = to_json(report);
  return settings_.json_lines ? json_line(document) : json_text(document);
}

void ReportOutput::write_json_file(Report& report) const {
  if (settings_.json_file.empty() || !settings_.prints_report) return;
  const auto failed = write_file_whole(settings_.json_file, report_json(report) + "\n");
  if (!failed) return;
  report.fail_afterwards(ErrorRecord{.message = *failed, .call = {}, .errnum = 0, .hint = {}, .completion = {}});
}

void ReportOutput::render(const Report& report, const std::string& diagnosis) const {
  for (const auto& error : report.errors) {
    auto lines = fmt::format("{}: {}\n", settings_.speaker, error.message);
    if (!error.hint.empty()) lines += fmt::format("{}: hint: {}\n", settings_.speaker, error.hint);
    std::cerr << lines << std::flush;
  }
  // diag-bind's own words: it ran under the name installed beside this program.
  std::cerr << diagnosis;
  if (!settings_.prints_report) return;
  if (settings_.json) {
    std::cout << report_json(report) << '\n' << std::flush;
  } else {
    std::cout << render_text(report) << std::flush;
  }
}

int ReportOutput::delivered(ExitCode code) const {
  std::cout.flush();
  if (!std::cout.fail()) return static_cast<int>(code);
  // A reader that went away (| head): said once, and a run that went well fails, as the
  // report was not delivered (the --json-file one, if any, was).
  const int errnum = errno;
  const char* why = errnum == EPIPE ? "the reader closed it (EPIPE)"
                    : errnum == 0   ? "it failed"
                                    : std::strerror(errnum);
  std::cerr << fmt::format("{}: cannot write the report to standard output: {}\n", settings_.speaker, why)
            << std::flush;
  return static_cast<int>(code == ExitCode::ok ? ExitCode::run_failed : code);
}

}  // namespace rdmakit
