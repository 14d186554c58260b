#pragma once
// How a tool's --diagnose reaches the diagnosers: it runs diag-bind, installed beside it, as
//   diag-bind --attached-diagnosis CALL SUBJECT ERRNUM ADDRESS TIMEOUT_MS [PORT_SPACE]
// with the failed call's fields (PORT_SPACE: the rdma_cm port space a connect diagnosis
// probes, tcp unless given; rdma_pingmesh's paths are udp), and diag-bind answers on stdout
// with one JSON object: the diagnosis the tool attaches to its report ("diagnosis") and the
// verdict as the tool prints it ("text"). Running the sibling, as rdma_smoke does, keeps the
// diagnosers' libraries (libnftables, libcap, libcrypto) out of the tools that only measure,
// and out of their package. Both ends of that exchange are here, so that they cannot drift
// apart.

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/error.hpp"

namespace rdmakit {

inline constexpr const char* attached_diagnosis_flag = "--attached-diagnosis";

// The failure a tool asks its sibling to diagnose, the bound on the diagnosis's waits, and
// the port space a connect diagnosis probes the peer's listener in.
struct DiagnosisRequest {
  RdmaError error;
  std::chrono::milliseconds timeout;
  std::string port_space = "tcp";
  // Readable once the diagnosis is no longer wanted (the run that asked is ending): the
  // sibling is ended then, not waited for. Not sent to it; -1 for none.
  int cancel_fd = -1;
};

// The sibling's argument list after the program's path.
std::vector<std::string> attached_diagnosis_arguments(const DiagnosisRequest& request);

// The request in a program's arguments when argv[1] is attached_diagnosis_flag; nullopt
// when it is not. Throws UsageError when it is, with the wrong arguments after it.
std::optional<DiagnosisRequest> attached_diagnosis_request(int argc, const char* const* argv);

// The sibling's answer: what it prints, and what the tool reads back from it. The answer is
// checked as any other program's output would be; it throws ProtocolError when it is not one.
struct AttachedDiagnosisAnswer {
  nlohmann::json diagnosis;
  std::string text;
};
std::string attached_diagnosis_answer(const AttachedDiagnosisAnswer& answer);
AttachedDiagnosisAnswer read_attached_diagnosis_answer(const std::string& output);

// Runs `diag_bind` (the sibling's path) on `request`, all its waits bounded together by six
// times the request's timeout and ten seconds. The answer, with what the diagnoser logged on
// the way first in its text; or, when it gave none, `failure` says why in one line (it could
// not start, naming the package that brings it; it timed out; its first line on stderr).
struct AttachedDiagnosisOutcome {
  std::optional<AttachedDiagnosisAnswer> answer;
  std::string failure;
};
AttachedDiagnosisOutcome ask_attached_diagnosis(const std::filesystem::path& diag_bind,
                                                const DiagnosisRequest& request);

}  // namespace rdmakit
