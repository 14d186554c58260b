#include "lib/tool/attached_diagnosis.hpp"

#include <charconv>
#include <string_view>
#include <system_error>

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

std::vector<std::string> attached_diagnosis_arguments(const RdmaError& error, std::chrono::milliseconds timeout) {
  return {attached_diagnosis_flag,        error.call(),    error.subject(),
          std::to_string(error.errnum()), error.address(), std::to_string(timeout.count())};
}

std::optional<DiagnosisRequest> attached_diagnosis_request(int argc, const char* const* argv) {
  if (argc < 2 || std::string_view(argv[1]) != attached_diagnosis_flag) return std::nullopt;
  if (argc != 7) {
    throw UsageError(std::string(attached_diagnosis_flag) +
                     " takes CALL SUBJECT ERRNUM ADDRESS TIMEOUT_MS (the failure a tool's --diagnose passes on)");
  }
  const auto errnum = whole_number(argv[4], "ERRNUM");
  const auto timeout = whole_number(argv[6], "TIMEOUT_MS");
  return DiagnosisRequest{.error = RdmaError(argv[2], argv[3], static_cast<int>(errnum), argv[5]),
                          .timeout = std::chrono::milliseconds(timeout)};
}

std::string attached_diagnosis_answer(const AttachedDiagnosisAnswer& answer) {
  return nlohmann::json{{"diagnosis", answer.diagnosis}, {"text", answer.text}}.dump() + "\n";
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
