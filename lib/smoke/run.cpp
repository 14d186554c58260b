#include "lib/smoke/run.hpp"

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "lib/base/error.hpp"
#include "lib/base/named_values.hpp"
#include "lib/base/report.hpp"
#include "lib/base/stats_json.hpp"

namespace rdmakit::smoke {

namespace {

constexpr int exit_unsupported = 77;
constexpr auto ready_poll = std::chrono::milliseconds(100);

std::vector<std::string> command_line(const Command& command, const RunEnvironment& environment) {
  std::vector<std::string> argv{environment.program(command.tool)};
  argv.insert(argv.end(), command.args.begin(), command.args.end());
  return argv;
}

nlohmann::json report_of(const std::string& out) {
  auto report = nlohmann::json::parse(out, nullptr, false);
  return report.is_object() ? report : nlohmann::json();
}

std::string last_line(const std::string& text) {
  auto end = text.find_last_not_of("\n\r ");
  if (end == std::string::npos) return {};
  const auto start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1,
                     end - (start == std::string::npos ? 0 : start + 1) + 1);
}

std::string string_at(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return {};
  const auto found = object.find(key);
  return found != object.end() && found->is_string() ? found->get<std::string>() : std::string();
}

// `read` applied to the report's KEY; none when it is missing or not what the tools write.
template <typename Read>
auto read_key(const nlohmann::json& report, const char* key, const Read& read)
    -> std::optional<decltype(read(report))> {
  if (!report.is_object() || !report.contains(key)) return std::nullopt;
  try {
    return read(report[key]);
  } catch (const ProtocolError&) {
    return std::nullopt;
  }
}

// The report's first error, read as the tools write it; none when it has none or its errors
// are not a tool's.
std::optional<ErrorRecord> first_error(const nlohmann::json& report) {
  auto errors =
      read_key(report, "errors", [](const nlohmann::json& items) { return error_records_from_json(items, "errors"); });
  if (!errors || errors->empty()) return std::nullopt;
  return std::move(errors->front());
}

ToolRun finished(std::string role, std::vector<std::string> command, ChildOutcome outcome) {
  ToolRun run{.role = std::move(role), .command = std::move(command), .outcome = std::move(outcome), .report = {}};
  run.report = report_of(run.outcome.out);
  return run;
}

std::string hint_of(const ToolRun& run) {
  const auto error = first_error(run.report);
  return error ? error->hint : std::string();
}

double number_at(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return 0;
  const auto found = object.find(key);
  return found != object.end() && found->is_number() ? found->get<double>() : 0;
}

// What a passing client measured, for the table: send_bw's row, a round-trip time, or the
// datagrams of a connection group.
std::string measured(const ToolRun& client) {
  const auto& r = client.report;
  if (!r.is_object()) return {};
  const auto latency = read_key(r, "rows", latency_rows_from_json);
  if (latency && !latency->empty()) {
    const auto& row = latency->front();
    return fmt::format("{} B: latency median {:.1f} us, p99 {:.1f} us", row.size, row.summary.p50_us,
                       row.summary.p99_us);
  }
  const auto bandwidth = read_key(r, "rows", bandwidth_rows_from_json);
  if (bandwidth && !bandwidth->empty()) {
    const auto& row = bandwidth->front();
    return fmt::format("{} B: {:.1f} MiB/s, {:.3f} Mpps", row.size, row.average_mib_per_s, row.message_rate_mpps);
  }
  const auto rtt =
      read_key(r, "rtt_us", [](const nlohmann::json& summary) { return latency_summary_from_json(summary, "rtt_us"); });
  if (rtt) return fmt::format("{} round trips, median {:.1f} us", rtt->count, rtt->p50_us);
  if (r.contains("messages") && r["messages"].is_object()) {
    const auto& m = r["messages"];
    if (number_at(m, "expected") == 0) {
      return fmt::format("{:g} connection(s), {:g} messages sent", number_at(r, "connections_ready"),
                         number_at(m, "sent"));
    }
    return fmt::format("{:g} connection(s), {:g} of {:g} messages, {:g} lost", number_at(r, "connections_ready"),
                       number_at(m, "received"), number_at(m, "expected"), number_at(m, "lost"));
  }
  if (r.contains("verdict") && r["verdict"].is_object()) return string_at(r["verdict"], "summary");
  return {};
}

// Starts the case's servers, each awaited until ready; the failure that stopped it, or "".
std::string start_servers(const SmokeCase& c, const RunEnvironment& environment, Clock::time_point deadline,
                          std::vector<std::pair<std::vector<std::string>, std::unique_ptr<ChildProcess>>>& servers) {
  for (const auto& command : c.servers) {
    auto argv = command_line(command, environment);
    auto& [started_argv, child] = servers.emplace_back(argv, std::make_unique<ChildProcess>(argv));
    if (!child->started()) return "";
    for (;;) {
      const bool running = child->pump(std::min(deadline, Clock::now() + ready_poll), environment.stop_fd);
      if (!running) return "";  // it ended before it was ready: its outcome says why
      const bool ready = c.ready_line.empty() ? environment.listening(c.port, child->pid())
                                              : child->err_so_far().find(c.ready_line) != std::string::npos;
      if (ready) break;
      if (Clock::now() >= deadline) {
        return c.ready_line.empty()
                   ? fmt::format("{} did not listen on port {} within {:g} s", command.tool, c.port, c.seconds)
                   : fmt::format("{} did not say '{}' within {:g} s", command.tool, c.ready_line, c.seconds);
      }
      if (environment.stop_fd >= 0 && wait_readable({environment.stop_fd}, Clock::now()).has_value()) {
        return "interrupted";
      }
    }
  }
  return "";
}

std::string program_name(const ToolRun& run) {
  return run.command.empty() ? std::string() : std::filesystem::path(run.command.front()).filename().string();
}

}  // namespace

void judge(CaseResult& result, const std::string& start_failure) {
  const auto client = std::ranges::find_if(result.runs, [](const ToolRun& r) { return r.role == "client"; });
  result.interrupted = std::ranges::any_of(result.runs, [](const ToolRun& r) { return r.outcome.interrupted; });
  // The device cannot do what the case asks (IPv6 multicast on RoCE v2): the tool that found
  // out says so with exit 77, server or client.
  const auto unsupported =
      std::ranges::find_if(result.runs, [](const ToolRun& r) { return r.outcome.exit_code == exit_unsupported; });
  if (unsupported != result.runs.end()) {
    result.outcome = CaseOutcome::skipped;
    result.reason = failure_of(*unsupported);
    return;
  }
  if (!start_failure.empty()) {
    result.outcome = CaseOutcome::failed;
    result.reason = start_failure;
    return;
  }
  // The client's failure first: a server that lost its client says less about the cause.
  std::vector<const ToolRun*> order;
  if (client != result.runs.end()) order.push_back(&*client);
  for (const auto& run : result.runs) {
    if (run.role != "client") order.push_back(&run);
  }
  for (const auto* run : order) {
    if (auto failure = failure_of(*run); !failure.empty()) {
      result.outcome = CaseOutcome::failed;
      const bool alone = std::ranges::all_of(result.runs, [](const ToolRun& r) { return r.role == "client"; });
      result.reason = fmt::format("{}{}: {}", program_name(*run), alone ? "" : " (" + run->role + ")", failure);
      result.hint = hint_of(*run);
      return;
    }
  }
  result.outcome = CaseOutcome::passed;
  if (client != result.runs.end()) result.reason = measured(*client);
}

std::string to_string(CaseOutcome outcome) {
  return std::string(name_in(case_outcome_names, outcome, "failed"));
}

std::string failure_of(const ToolRun& run) {
  const auto& o = run.outcome;
  if (!o.start_error.empty()) return "could not start: " + o.start_error;
  if (o.exit_code == 0 && !o.timed_out && !o.interrupted) return {};
  std::string why;
  if (const auto error = first_error(run.report)) why = error->message;
  if (why.empty() && run.report.is_object() && run.report.contains("verdict")) {
    const auto& verdict = run.report["verdict"];
    const auto cause = string_at(verdict, "cause");
    const auto summary = string_at(verdict, "summary");
    if (!cause.empty()) why = cause + (summary.empty() ? "" : ": " + summary);
  }
  if (why.empty()) why = last_line(o.err);
  std::string ended;
  if (o.interrupted) {
    ended = "interrupted";
  } else if (o.timed_out) {
    ended = fmt::format("still running after {:.0f} s, ended", o.seconds);
  } else if (o.signal != 0) {
    ended = fmt::format("killed by signal {} ({})", o.signal, sigabbrev_np(o.signal) ? sigabbrev_np(o.signal) : "?");
  } else {
    ended = fmt::format("exit {}", o.exit_code);
  }
  return why.empty() ? ended : why + " (" + ended + ")";
}

CaseServers::CaseServers(const SmokeCase& smoke_case, const RunEnvironment& environment, Clock::time_point deadline)
    : stop_fd_(environment.stop_fd) {
  start_failure_ = start_servers(smoke_case, environment, deadline, servers_);
  ready_ = start_failure_.empty() && std::ranges::all_of(servers_, [](const auto& server) {
             return server.second->started() && server.second->pump(Clock::now(), -1);
           });
}

std::vector<ToolRun> CaseServers::finish(bool client_passed, Clock::time_point deadline) {
  std::vector<ToolRun> runs;
  for (auto& [argv, server] : servers_) {
    // A server still waiting for its client after the client failed is ended now; after a
    // passing client it has until the deadline to end on its own.
    const auto outcome = client_passed && ready_ ? server->finish(deadline, stop_fd_) : server->end();
    runs.push_back(finished("server", argv, outcome));
  }
  servers_.clear();
  return runs;
}

ToolRun run_client(const SmokeCase& smoke_case, const RunEnvironment& environment, Clock::time_point deadline) {
  auto argv = command_line(smoke_case.client, environment);
  ChildProcess client(argv);
  return finished("client", argv, client.finish(deadline, environment.stop_fd));
}

CaseResult result_of(const SmokeCase& smoke_case) {
  CaseResult result;
  result.name = smoke_case.name;
  result.tool = smoke_case.tool;
  result.address = smoke_case.address;
  result.direction = smoke_case.direction;
  return result;
}

Clock::time_point case_deadline(const SmokeCase& smoke_case, Clock::time_point started) {
  return started + std::chrono::milliseconds(static_cast<long long>(smoke_case.seconds * 1000));
}

CaseResult run_case(const SmokeCase& smoke_case, const RunEnvironment& environment) {
  return run_with_servers_here(smoke_case, environment, [&smoke_case, &environment](Clock::time_point deadline) {
    return run_client(smoke_case, environment, deadline);
  });
}

CaseResult run_with_servers_here(const SmokeCase& smoke_case, const RunEnvironment& environment,
                                 const std::function<ToolRun(Clock::time_point deadline)>& client) {
  auto result = result_of(smoke_case);
  const auto started = Clock::now();
  const auto deadline = case_deadline(smoke_case, started);
  CaseServers servers(smoke_case, environment, deadline);
  if (servers.ready()) result.runs.push_back(client(deadline));
  const bool client_passed = !result.runs.empty() && result.runs.front().outcome.exit_code == 0;
  for (auto& run : servers.finish(client_passed, deadline)) result.runs.push_back(std::move(run));
  judge(result, servers.start_failure());
  result.seconds = elapsed_ms(started) / 1000.0;
  return result;
}

}  // namespace rdmakit::smoke
