// How a connection group's report is made (lib/cm_tools/group_report.hpp).

#include "lib/cm_tools/group_report.hpp"

#include <algorithm>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lib/rdma/cm.hpp"

namespace rdmakit {

namespace {

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

}  // namespace

nlohmann::json to_json(const Connection& connection, const SiblingNames& siblings) {
  nlohmann::json steps = nlohmann::json::object();
  for (const auto& span : connection.steps()) {
    steps[std::string(step_name(span.step))] = span.ms();
  }
  const auto received = connection.received();
  const auto expected = connection.receives_expected();
  nlohmann::json j = {
      {"index", connection.index()},
      {"state", to_string(connection.state())},
      {"steps_ms", steps},
      {"sends_completed", connection.sends_completed()},
      {"received", received},
      {"receives_expected", expected},
      {"lost", expected > received ? expected - received : 0},
  };
  if (const auto& current = connection.current_step()) {
    j["unfinished_step"] = current->step();
  }
  if (rdma_cm_id* id = connection.cm_id(); id != nullptr) {
    j["local_address"] = address_of(rdma_get_local_addr(id)).to_string();
    j["peer_address"] = address_of(rdma_get_peer_addr(id)).to_string();
    if (id->qp != nullptr) {
      j["qp_num"] = id->qp->qp_num;
    }
  }
  if (connection.remote_qpn() != 0) {
    j["remote_qpn"] = connection.remote_qpn();
  }
  if (const auto timer = connection.rnr_nak_timer()) j["rnr_nak_timer"] = *timer;
  if (const auto& failure = connection.failure()) {
    j["failure"] = to_json(record_of(*failure, siblings));
    const auto failed = std::ranges::find_if(connection.steps(), [](const StepSpan& span) { return span.failed; });
    if (failed != connection.steps().end()) j["failed_step"] = failed->step;
  }
  return j;
}

namespace {

struct Totals {
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
  std::uint64_t expected = 0;
  std::size_t ready = 0;
  std::vector<const Connection*> failed;
  std::optional<double> setup_ms;  // first step started -> last connection ready
  std::vector<StepSpan> spans;
};

Totals totals_of(const std::vector<std::unique_ptr<Connection>>& connections) {
  Totals t;
  std::optional<Clock::time_point> first_start;
  std::optional<Clock::time_point> last_ready;
  for (const auto& c : connections) {
    t.sent += c->sends_completed();
    t.received += c->received();
    t.expected += c->receives_expected();
    t.spans.insert(t.spans.end(), c->steps().begin(), c->steps().end());
    if (!c->steps().empty()) {
      const auto start = c->steps().front().started;
      first_start = first_start ? std::min(*first_start, start) : start;
    }
    if (c->failure()) {
      t.failed.push_back(c.get());
    }
    if (const auto ready = c->ready_at()) {
      ++t.ready;
      last_ready = last_ready ? std::max(*last_ready, *ready) : *ready;
    }
  }
  if (t.ready > 0 && first_start && last_ready) {
    t.setup_ms = ms_between(*first_start, *last_ready);
  }
  return t;
}

}  // namespace

void GroupResult::add_to(nlohmann::json& document) const {
  nlohmann::json table = nlohmann::json::array();
  for (const auto& row : steps) {
    table.push_back({{"step", row.step},
                     {"connections", row.spans},
                     {"wall_ms", row.wall_ms},
                     {"max_ms", row.max_ms},
                     {"min_ms", row.min_ms},
                     {"avg_ms", row.avg_ms},
                     {"per_connection_us", row.per_connection_us},
                     {"failed", row.failed}});
  }
  document["steps"] = table;
  document["connections"] = connections;
  document["events"] = events;
  document["connections_requested"] = connections_requested;
  document["connections_ready"] = connections_ready;
  document["connections_failed"] = failures.size();
  if (setup_ms) {
    document["setup"] = {
        {"wall_ms", *setup_ms}, {"per_connection_ms", per_connection_ms()}, {"connections_per_s", per_second()}};
  }
  document["messages"] = {
      {"size", message_size}, {"sent", sent}, {"received", received}, {"expected", expected}, {"lost", lost()}};
}

std::string GroupResult::text() const {
  std::ostringstream out;
  // The failed column only when something failed: a clean run prints the table cmtime does.
  const bool any_failed = !failures.empty();
  out << fmt::format("{:<14} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10}{}\n", "step", "conns", "wall ms", "max ms",
                     "min ms", "avg ms", "us/conn", any_failed ? fmt::format(" {:>6}", "failed") : "");
  for (const auto& row : steps) {
    out << fmt::format("{:<14} {:>6} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.1f}{}\n", step_name(row.step),
                       row.spans, row.wall_ms, row.max_ms, row.min_ms, row.avg_ms, row.per_connection_us,
                       any_failed ? fmt::format(" {:>6}", row.failed) : "");
  }
  if (setup_ms) {
    out << fmt::format("{} of {} connection(s) ready in {:.2f} ms ({:.3f} ms per connection, {:.1f} per second)\n",
                       connections_ready, connections_requested, *setup_ms, per_connection_ms(), per_second());
  } else {
    out << fmt::format("0 of {} connection(s) ready\n", connections_requested);
  }
  constexpr std::size_t failures_listed = 5;
  for (std::size_t i = 0; i < std::min(failures.size(), failures_listed); ++i) {
    out << fmt::format("connection {} failed: {}\n", failures[i].index, failures[i].message);
  }
  if (failures.size() > failures_listed) {
    out << fmt::format("... and {} more failed connection(s)\n", failures.size() - failures_listed);
  }
  out << fmt::format("messages: {} sent, {} of {} received ({} lost), {} bytes each\n", sent, received, expected,
                     lost(), message_size);
  for (const auto& event : events) {
    out << "event: " << event.dump() << "\n";
  }
  return out.str();
}

void fill_report(const ConnectionGroup& group, Report& report) {
  const auto& options = group.options();
  const Totals totals = totals_of(group.connections());
  GroupResult result;
  for (const auto& c : group.connections()) {
    result.connections.push_back(to_json(*c, report.siblings));
  }
  result.steps = step_table(totals.spans);
  report.timings.clear();
  for (const auto& row : result.steps) {
    report.add_timing(row.step, row.wall_ms);
  }
  result.events = group.events();
  result.connections_requested = options.connections;
  result.connections_ready = totals.ready;
  for (const auto* failed : totals.failed) {
    result.failures.push_back({.index = failed->index(), .message = failed->failure()->what()});
  }
  result.setup_ms = totals.setup_ms;
  result.message_size = options.message_size;
  result.sent = totals.sent;
  result.received = totals.received;
  result.expected = totals.expected;
  report.iterations_completed = totals.received;
  report.bytes = (totals.sent + totals.received) * options.message_size;
  report.local_address = group.local_address();
  report.peer_address = group.target();
  report.add(std::move(result));
  // With none ready, setup threw the first failure itself, and that is the run's error.
  if (!totals.failed.empty() && totals.ready > 0) {
    const auto& first = *totals.failed.front();
    const auto error = record_of(*first.failure(), report.siblings);
    report.fail(
        ErrorRecord{.message = fmt::format("{} of {} connection(s) failed, the others went on; connection {}: {}",
                                           totals.failed.size(), options.connections, first.index(), error.message),
                    .call = error.call,
                    .errnum = error.errnum,
                    .hint = error.hint,
                    .completion = error.completion});
  }
}

FillReportOnExit::~FillReportOnExit() {
  try {
    fill_report(group_, report_);
  } catch (const std::exception& error) {
    spdlog::warn("could not complete the report: {}", error.what());
  }
}

}  // namespace rdmakit
