#pragma once
// diag-connect's result in its report: the capture (both views and the attempt) and the
// verdict beside the common keys, the human text, and the verdict's cause as the outcome.

#include <optional>
#include <string>

#include "lib/base/report.hpp"
#include "lib/diag/connect_diagnosis.hpp"

namespace rdmakit::diag {

class ConnectResult final : public ReportSection {
 public:
  // `interrupted`: Ctrl-C cut the run short; the outcome is then the report's own.
  ConnectResult(ConnectCase connect_case, ConnectVerdict verdict, bool interrupted)
      : case_(std::move(connect_case)), verdict_(std::move(verdict)), interrupted_(interrupted) {}
  void add_to(nlohmann::json& document) const override;
  std::string text() const override { return render_connect_text(case_, verdict_); }
  std::optional<std::string> outcome() const override {
    return interrupted_ ? std::nullopt : std::optional<std::string>(verdict_.cause.name());
  }

 private:
  ConnectCase case_;
  ConnectVerdict verdict_;
  bool interrupted_;
};

// The verdict alone, for other tools' --diagnose: the cause and summary, the evidence, the fix.
std::string render_connect_verdict(const ConnectVerdict& verdict, const SiblingNames& siblings);

// Diagnoses `connect_case` and fills the report with it: the result, the addresses, the
// exit status (the verdict's, or an interrupted run's when Ctrl-C cut a step short).
void add_connect_result(ConnectCase connect_case, Report& report);

}  // namespace rdmakit::diag
