#include "lib/tool/attached_diagnosis.hpp"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <string_view>
#include <system_error>

#include <fmt/format.h>

#include "lib/base/child_process.hpp"
#include "lib/base/untrusted_json.hpp"

namespace rdmakit {

namespace {

// A connect diagnosis carries both hosts' captures, the firewall's rules among them: deeper
// than a report, far shallower than a stack overflow.
constexpr std::size_t answer_depth = 64;

long long whole_number(std::string_view text, std::string_view what) {
  long long value = 0;
  const auto [end, problem] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (problem != std::errc() || end != text.data() + text.size() || value < 0) {
    throw UsageError(std::string(attached_diagnosis_flag) + ": " + std::string(what) + " '" + std::string(text) +
                     "' is not a whole number");
  }
  return value;
}

}  // namespace

std::vector<std::string> attached_diagnosis_arguments(const DiagnosisRequest& request) {
  const auto& error = request.error;
  return {attached_diagnosis_flag, error.call(),
          error.subject(),         std::to_string(error.errnum()),
          error.address(),         std::to_string(request.timeout.count()),
          request.port_space};
}

std::optional<DiagnosisRequest> attached_diagnosis_request(int argc, const char* const* argv) {
  if (argc < 2 || std::string_view(argv[1]) != attached_diagnosis_flag) return std::nullopt;
  if (argc != 7 && argc != 8) {
    throw UsageError(std::string(attached_diagnosis_flag) +
                     " takes CALL SUBJECT ERRNUM ADDRESS TIMEOUT_MS [PORT_SPACE] (the failure a tool's --diagnose "
                     "passes on)");
  }
  const auto errnum = whole_number(argv[4], "ERRNUM");
  const auto timeout = whole_number(argv[6], "TIMEOUT_MS");
  const std::string port_space = argc == 8 ? argv[7] : "tcp";
  if (port_space != "tcp" && port_space != "udp") {
    throw UsageError(std::string(attached_diagnosis_flag) + ": PORT_SPACE '" + port_space + "' is not tcp or udp");
  }
  return DiagnosisRequest{.error = RdmaError(argv[2], argv[3], static_cast<int>(errnum), argv[5]),
                          .timeout = std::chrono::milliseconds(timeout),
                          .port_space = port_space};
}

std::string attached_diagnosis_answer(const AttachedDiagnosisAnswer& answer) {
  return nlohmann::json{{"diagnosis", answer.diagnosis}, {"text", answer.text}}.dump() + "\n";
}

AttachedDiagnosisOutcome ask_attached_diagnosis(const std::filesystem::path& diag_bind,
                                                const DiagnosisRequest& request) {
  const auto bound = std::chrono::duration_cast<std::chrono::seconds>(request.timeout * 6) + std::chrono::seconds(10);
  std::vector<std::string> argv{diag_bind.string()};
  std::ranges::move(attached_diagnosis_arguments(request), std::back_inserter(argv));
  const auto outcome = ChildProcess(argv).finish(Clock::now() + bound, request.cancel_fd);
  if (!outcome.start_error.empty()) {
    return {.answer = std::nullopt,
            .failure = fmt::format("--diagnose runs {}, which could not start: {} ({} comes with the package "
                                   "rdmakit-diag)",
                                   diag_bind.string(), outcome.start_error, diag_bind.filename().string())};
  }
  if (outcome.timed_out) {
    return {.answer = std::nullopt,
            .failure = fmt::format("{} took longer than {} s and was ended", diag_bind.string(), bound.count())};
  }
  if (outcome.exit_code != 0) {
    const auto said = outcome.err.substr(0, outcome.err.find('\n'));
    return {.answer = std::nullopt,
            .failure = said.empty() ? fmt::format("{} ended with exit {}, signal {}", diag_bind.string(),
                                                  outcome.exit_code, outcome.signal)
                                    : said};
  }
  try {
    auto answer = read_attached_diagnosis_answer(outcome.out);
    answer.text = outcome.err + answer.text;
    return {.answer = std::move(answer), .failure = {}};
  } catch (const ProtocolError& unreadable) {
    return {.answer = std::nullopt, .failure = unreadable.what()};
  }
}

AttachedDiagnosisAnswer read_attached_diagnosis_answer(const std::string& output) {
  const auto answer = parse_untrusted_json(output, answer_depth, "diag-bind's answer");
  if (!answer.is_object() || !answer.contains("diagnosis") || !answer["diagnosis"].is_object() ||
      !answer.contains("text") || !answer["text"].is_string()) {
    throw ProtocolError("diag-bind's answer is not an object with \"diagnosis\" and \"text\"");
  }
  return {.diagnosis = answer["diagnosis"], .text = answer["text"].get<std::string>()};
}

}  // namespace rdmakit
