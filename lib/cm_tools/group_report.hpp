#pragma once
// What a connection group (lib/rdma/connection_group) reports for udaddy, ucmatose and
// mckey: each connection's record, the cmtime-style step table, setup rate, messages and
// failures, as JSON and as the human summary.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/report.hpp"
#include "lib/base/stats.hpp"
#include "lib/rdma/connection_group.hpp"

namespace rdmakit {

// One connection's record: its state, steps, counts, addresses and failure.
// A failure's hint names siblings as `siblings` has them.
nlohmann::json to_json(const Connection& connection, const SiblingNames& siblings);

// A connection group's result in its report: the cmtime-style step table, each connection's
// record, setup rate, messages and failures, with the human summary.
struct GroupResult final : ReportSection {
  struct Failure {
    std::size_t index = 0;  // the connection's
    std::string message;
  };
  std::vector<StepRow> steps;
  nlohmann::json connections = nlohmann::json::array();  // each connection's own record
  nlohmann::json events = nlohmann::json::array();
  std::size_t connections_requested = 0;
  std::size_t connections_ready = 0;
  std::vector<Failure> failures;
  std::optional<double> setup_ms;  // first step started -> last connection ready
  std::uint32_t message_size = 0;
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
  std::uint64_t expected = 0;

  std::uint64_t lost() const { return expected > received ? expected - received : 0; }
  double per_connection_ms() const { return *setup_ms / static_cast<double>(connections_ready); }
  double per_second() const {
    return *setup_ms > 0 ? 1000.0 * static_cast<double>(connections_ready) / *setup_ms : 0.0;
  }
  void add_to(nlohmann::json& document) const override;
  std::string text() const override;
};

// Per-connection results, the step table, messages and setup rate, and the human summary
// (cmtime-style step table); safe on a partial run. Connections that failed while others
// became ready fail the report, with the first one's call and errno.
void fill_report(const ConnectionGroup& group, Report& report);

// Fills the report from the group when the run ends, normally or by an exception.
class FillReportOnExit {
 public:
  FillReportOnExit(const ConnectionGroup& group, Report& report) : group_(group), report_(report) {}
  ~FillReportOnExit();
  FillReportOnExit(const FillReportOnExit&) = delete;
  FillReportOnExit& operator=(const FillReportOnExit&) = delete;

 private:
  const ConnectionGroup& group_;
  Report& report_;
};

}  // namespace rdmakit
