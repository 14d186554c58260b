#pragma once
// diag-bind's answer to another tool's --diagnose: diag-bind's own diagnosis for an address or
// device failure, diag-connect's for a failure to reach the peer.

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "lib/base/error.hpp"
#include "lib/tool/attached_diagnosis.hpp"

namespace rdmakit::diag {

// The diagnosis of a tool's --diagnose (ToolRunner::enable_diagnose): diag-bind's for an
// address or device failure, diag-connect's (lib/diag/connect_probe.hpp) for a failure to
// reach the peer (probing its listener in the request's port space); returns its JSON, with
// the human verdict in `text`; its next steps name diag-bind and diag-connect as `siblings` has them.
nlohmann::json diagnose_for_tool(const DiagnosisRequest& request, const SiblingNames& siblings, std::string& text);

// diag-bind's side of that exchange (lib/tool/attached_diagnosis.hpp): when argv asks for
// it, the diagnosis printed as the answer, and the exit status (0 answered, 1 the diagnosis
// failed, its reason on stderr, 2 a malformed request); nullopt when argv does not ask.
std::optional<int> answer_attached_diagnosis(int argc, const char* const* argv);

}  // namespace rdmakit::diag
