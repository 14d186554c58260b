// diag-connect: the agent's answer as it comes off the TCP side channel, never trusted. The
// input is the answer's bytes; an accepted one is put into a fixture's case (the client's side
// of tests/fixtures/connect/ok.json, its connect timed out) and diagnosed and rendered.

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "lib/base/error.hpp"
#include "lib/diag/connect_diagnosis.hpp"

namespace {

using namespace rdmakit;

// The client's half: what the answer is judged against. A timed-out connect lets every rule
// that reads the peer's view run.
const diag::ConnectCase& client_case() {
  static const diag::ConnectCase base = [] {
    std::ifstream in(RDMAKIT_CONNECT_FIXTURES "/ok.json");
    auto c = diag::connect_case_from_json(nlohmann::json::parse(in));
    for (auto& step : c.attempt.steps) {
      if (step.name == Step::connect) step.status = diag::StepStatus::timeout;
    }
    return c;
  }();
  return base;
}

void check_verdict(const diag::ConnectCase& c) {
  const auto verdict = diag::diagnose_connect(c);
  FUZZ_CHECK(!verdict.summary.empty());  // its cause is one of its table's, by type
  FUZZ_CHECK(verdict.summary.find('\n') == std::string::npos);
  FUZZ_CHECK(verdict.exit_code == ExitCode::cause_found || verdict.exit_code == ExitCode::unexplained);
  FUZZ_CHECK((verdict.cause == "unknown") == (verdict.exit_code == ExitCode::unexplained));
  FUZZ_CHECK(!diag::render_connect_text(c, verdict).empty());
  // --json prints it: the answer's text must not make the dump throw.
  FUZZ_CHECK(!diag::to_json(verdict).dump().empty());
  FUZZ_CHECK(!diag::to_json(c).dump().empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = fuzz::as_text(data, size);
  diag::PeerAnswer answer;
  // Anything that does not fit must be a ProtocolError that says what in one line; any other
  // exception, nlohmann's included, escapes and counts as a crash.
  try {
    answer = diag::parse_peer_answer(bytes);
  } catch (const ProtocolError& error) {
    FUZZ_CHECK(std::string_view(error.what()).find('\n') == std::string_view::npos);
    return 0;
  }
  FUZZ_CHECK(size <= diag::max_answer_bytes);
  // An accepted answer re-encodes to a document that reads back as itself.
  const auto encoded = diag::to_json(answer);
  FUZZ_CHECK(diag::to_json(diag::peer_answer_from_json(encoded)) == encoded);
  FUZZ_CHECK(answer.view.devices.size() <= diag::max_list_entries);

  auto c = client_case();
  c.agent.status = diag::AgentStatus::ok;
  c.peer = std::move(answer);
  check_verdict(c);
  c.agent.status = diag::AgentStatus::invalid;  // the same case, the answer set aside
  check_verdict(c);
  return 0;
}
