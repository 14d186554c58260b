#include "lib/diag/attached_answer.hpp"

#include <iostream>

#include <spdlog/spdlog.h>

#include "lib/base/log.hpp"
#include "lib/diag/connect_probe.hpp"
#include "lib/diag/host_probe.hpp"
#include "lib/diag/sysfs.hpp"
#include "lib/tool/attached_diagnosis.hpp"
#include "lib/tool/program_names.hpp"

namespace rdmakit::diag {

nlohmann::json diagnose_for_tool(const DiagnosisRequest& request, const SiblingNames& siblings, std::string& text) {
  const auto& error = request.error;
  if (!explained_by_diag_bind(error.call(), error.errnum()) && explained_by_diag_connect(error)) {
    return diagnose_connect_failure(error.address(), port_in_subject(error.subject()), request.timeout, siblings, text,
                                    request.port_space);
  }
  ProbeOptions options;
  options.limits.timeout = request.timeout;
  options.siblings = siblings;
  const auto diagnosis = diagnose_address(error.address(), options);
  text = render_verdict(diagnosis.verdict);
  return to_json(diagnosis);
}

std::optional<int> answer_attached_diagnosis(int argc, const char* const* argv) {
  try {
    const auto request = attached_diagnosis_request(argc, argv);
    if (!request) return std::nullopt;
    setup_logging("diag-bind", spdlog::level::warn);
    // Started by a sibling under the name installed beside it: the names its answer gives.
    ProgramNames names("diag-bind");
    if (argc > 0) names.take_invoked(argv[0]);
    AttachedDiagnosisAnswer answer;
    answer.diagnosis = diagnose_for_tool(*request, names.siblings(), answer.text);
    std::cout << attached_diagnosis_answer(answer) << std::flush;
    return 0;
  } catch (const UsageError& error) {
    std::cerr << error.what() << '\n';
    return 2;
  } catch (const std::exception& error) {
    std::cerr << error.what() << '\n';
    return 1;
  }
}

}  // namespace rdmakit::diag
