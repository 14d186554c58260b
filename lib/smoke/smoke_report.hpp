#pragma once
// rdma_smoke's results: the report section (the cases under "smoke", the human table) and
// the JUnit XML that CI test reporters read.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/described_json.hpp"
#include "lib/base/report.hpp"
#include "lib/smoke/run.hpp"

namespace rdmakit::smoke {

struct SmokeRun {
  std::vector<std::string> addresses;
  std::vector<CaseResult> cases;
  // When the host has no RDMA device at all: diag-bind's report, whose verdict says why.
  std::optional<nlohmann::json> no_device;
  double seconds = 0;
  // --serve: peers refused by the key handshake before the one served.
  std::optional<std::uint64_t> unauthenticated;
  // Why the run ended before its cases could (the peer's key handshake failed, the serving
  // side went away before the plan): the JUnit XML's one error, the report's own error.
  std::optional<std::string> aborted;

  std::size_t count(CaseOutcome outcome) const;
};

nlohmann::json to_json(const CaseResult& result);
nlohmann::json to_json(const SmokeRun& run);
// The cases' and the summary's shapes and their schema definitions (tests/unit/described_json_test.cpp).
std::vector<described::SchemaShape> smoke_report_shapes();
std::string render_table(const SmokeRun& run);

// JUnit XML (the Jenkins/Ant dialect GitLab and GitHub reporters read): one <testsuite> per
// address, one <testcase> per case with <failure> or <skipped> carrying the reason and the
// hint, and each tool's JSON report in <system-out>.
std::string junit_xml(const SmokeRun& run, const std::string& host_name);

class SmokeResult final : public ReportSection {
 public:
  explicit SmokeResult(SmokeRun run) : run_(std::move(run)) {}
  void add_to(nlohmann::json& document) const override { document["smoke"] = to_json(run_); }
  std::string text() const override { return render_table(run_); }

 private:
  SmokeRun run_;
};

}  // namespace rdmakit::smoke
