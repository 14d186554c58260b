#include "lib/smoke/smoke_session.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "lib/base/error.hpp"
#include "lib/base/host_name.hpp"
#include "lib/base/text_file.hpp"
#include "lib/base/wait.hpp"
#include "lib/net/key_handshake.hpp"
#include "lib/net/shared_key.hpp"
#include "lib/smoke/plan.hpp"
#include "lib/smoke/run.hpp"
#include "lib/smoke/smoke_report.hpp"
#include "lib/tool/cli_checks.hpp"

namespace rdmakit::smoke {

namespace {

namespace fs = std::filesystem;

// --serve answers one peer: --allow alone, by default the control port's local subnets.
constexpr GateFlags smoke_gate{.local_default = true, .cap = false, .rate = false, .per_peer = false};

// The tools installed beside this program, never ones found on PATH: rdmacm-utils installs
// stock tools of the same names.
fs::path tools_dir(const SmokeOptions& o) {
  if (!o.tools_dir.empty()) return o.tools_dir;
  return ProgramNames::directory();
}

void write_junit(const std::string& file, const std::string& xml) {
  if (file.empty()) return;
  if (const auto failed = write_file_whole(file, xml)) throw std::runtime_error("--junit: " + *failed);
}

PlanOptions plan_for(const SmokeOptions& o, const std::string& address, double timeout_s) {
  return {.address = address,
          .local_address = {},
          .first_port = o.first_port,
          .quick = o.quick,
          .timeout_s = timeout_s,
          .case_seconds = o.case_seconds,
          .tools = o.tools,
          .skip = o.skip};
}

void progress(const CaseResult& result) {
  std::cerr << fmt::format("{} {}: {}\n", result.name, result.address, to_string(result.outcome));
}

// Where there is nothing to test: diag-bind alone, skipped whatever it says.
void run_no_device(const SmokeOptions& o, double timeout_s, const RunEnvironment& environment, SmokeRun& run) {
  auto plan = plan_for(o, "", timeout_s);
  plan.tools = {"diag-bind"};
  plan.skip.clear();
  auto result = run_case(plan_cases(plan).front(), environment);
  run.no_device = result.runs.empty() ? nlohmann::json() : result.runs.front().report;
  // Nothing could start here: a CI that reads exit 77 as "skipped" must see no failure in
  // the table or the JUnit file either.
  result.outcome = CaseOutcome::skipped;
  if (run.no_device->is_object()) {
    const auto verdict = run.no_device->value("verdict", nlohmann::json::object());
    result.reason = fmt::format("nothing to test: {}: {}", verdict.value("cause", std::string("unknown")),
                                verdict.value("summary", std::string()));
  }
  run.cases.push_back(std::move(result));
}

// This host alone: every case on each address.
void run_here(const SmokeOptions& o, const SmokeHost& host, const std::vector<std::string>& addresses, double timeout_s,
              const RunEnvironment& environment, SmokeRun& run) {
  auto plan = plan_for(o, "", timeout_s);
  for (const auto& address : addresses) {
    plan.address = host.numeric(address);
    for (const auto& smoke_case : plan_cases(plan)) {
      run.cases.push_back(run_case(smoke_case, environment));
      progress(run.cases.back());
      if (run.cases.back().interrupted) return;
    }
    plan.first_port = static_cast<std::uint16_t>(plan.first_port + ports_per_plan);
  }
}

// Across the wire to rdma_smoke --serve on the peer: each case forward (the client here),
// reverse (the servers here), or both.
void run_against_peer(const SmokeOptions& o, const SmokeHost& host, const std::string& local, double timeout_s,
                      const RunEnvironment& environment, SmokeRun& run) {
  PeerPlan plan{.forward = plan_for(o, host.numeric(o.peer), timeout_s),
                .run_forward = o.direction != "reverse",
                .run_reverse = o.direction != "forward"};
  plan.forward.local_address = local;
  const auto key = o.key_file.empty() ? std::nullopt : std::optional(read_shared_key(o.key_file));
  auto channel = [&] {
    try {
      // From this side's address: the serving side runs its clients toward where the control
      // connection comes from, and nowhere else.
      return ControlChannel::connect_to(plan.forward.address, o.control_port, Clock::now() + std::chrono::seconds(30),
                                        environment.stop_fd, key ? &*key : nullptr, local);
    } catch (const handshake::AuthenticationError& refused) {
      throw ProtocolError(
          fmt::format("the key handshake with {}:{}: {}", plan.forward.address, o.control_port, refused.what()));
    }
  }();
  PeerSession session(std::move(channel), plan);
  for (const auto& smoke_case : peer_cases(plan)) {
    try {
      run.cases.push_back(session.run_case(smoke_case, environment));
    } catch (const std::exception& lost) {
      // The serving side went away or broke the protocol: this case fails with why, and the
      // report keeps the cases before it.
      auto result = result_of(smoke_case);
      result.reason = std::string("the serving side: ") + lost.what();
      result.interrupted = dynamic_cast<const RunStopped*>(&lost) != nullptr &&
                           dynamic_cast<const RunStopped&>(lost).reason() == StopReason::interrupted;
      run.cases.push_back(std::move(result));
      progress(run.cases.back());
      return;
    }
    progress(run.cases.back());
    if (run.cases.back().interrupted) return;
  }
  session.done();
}

void finish_report(SmokeRun run, const SmokeOptions& o, Report& report) {
  const bool interrupted = !run.cases.empty() && run.cases.back().interrupted;
  if (run.no_device) {
    const auto& verdict = run.no_device->is_object() ? run.no_device->value("verdict", nlohmann::json::object())
                                                     : nlohmann::json::object();
    report.fail({.message = "nothing to test: " + verdict.value("summary", std::string("no RDMA port with an address")),
                 .call = "",
                 .errnum = 0,
                 .hint = "",
                 .completion = {}},
                ExitCode::no_device);
  } else if (interrupted) {
    report.stop(StopReason::interrupted, "stopped by a signal");
  } else if (run.count(CaseOutcome::failed) > 0) {
    report.fail({.message = fmt::format("{} of {} cases failed", run.count(CaseOutcome::failed), run.cases.size()),
                 .call = "",
                 .errnum = 0,
                 .hint = "",
                 .completion = {}});
  }
  // The report keeps the results even when the XML cannot be written.
  const auto xml = o.junit_file.empty() ? std::string() : junit_xml(run, host_name());
  report.add(SmokeResult(std::move(run)));
  write_junit(o.junit_file, xml);
}

// The cases this run takes: --serve's, --peer's, or this host's alone. Returns why the peer
// was lost ("" when it was not). `program`: this tool's name as packaged, for --serve's lines.
std::string run_cases(const SmokeOptions& o, const SmokeHost& host, double timeout_s, const RunEnvironment& environment,
                      const std::string& program, SmokeRun& run, Report& report) {
  const auto ports = host.port_addresses();
  std::vector<std::string> addresses = o.addresses;
  if (addresses.empty() && ports) addresses = *ports;
  if (!ports || addresses.empty()) {
    run_no_device(o, timeout_s, environment, run);
  } else if (o.serve) {
    report.role = "server";
    ServeResult served;
    try {
      serve_smoke(
          {.address = host.numeric(addresses.front()),
           .bind = {},
           .control_port = o.control_port,
           .accept_seconds = o.accept_seconds,
           .key = o.key_file.empty() ? std::nullopt : std::optional(read_shared_key(o.key_file)),
           .peers = o.peers.limits({}, smoke_gate)},
          environment, [&program](const std::string& line) { std::cerr << program << " --serve: " << line << '\n'; },
          served);
    } catch (const RunStopped&) {
      report.add(RefusedPeers(served.refused));
      throw;
    }
    run.cases = std::move(served.cases);
    run.unauthenticated = served.unauthenticated;
    report.add(RefusedPeers(served.refused));
    return served.lost;
  } else if (!o.peer.empty()) {
    report.role = "client";
    const auto route_source = host.route_source(host.numeric(o.peer));
    const auto local = o.addresses.empty() ? route_source : host.numeric(o.addresses.front());
    run_against_peer(o, host, local, timeout_s, environment, run);
  } else {
    run_here(o, host, addresses, timeout_s, environment, run);
  }
  return {};
}

}  // namespace

void SmokeOptions::add_to(ToolRunner& runner) {
  runner.rename_argument("port", "first_port");
  runner.rename_argument("address", "addresses");
  auto& app = runner.app();
  app.add_option("address", addresses,
                 "Addresses to test, each on its own (default: every RDMA port's address); with --serve, the one "
                 "this host's servers listen on");
  app.add_option("-p,--port", first_port, "First rdma_cm port; each case that listens takes the next one")
      ->capture_default_str()
      ->check(CLI::Range(1, 65000));
  app.add_option("--tools", tools,
                 "Only these tools (comma-separated): " + fmt::format("{}", fmt::join(smoke_tools(), ",")))
      ->allow_extra_args(false)
      ->delimiter(',');
  // One value a flag: without it the addresses after --tools would be taken for tools.
  app.add_option("--skip", skip, "Not these tools (comma-separated)")->allow_extra_args(false)->delimiter(',');
  app.add_flag("--quick", quick, "The smallest meaningful run: diag-bind, rping, udaddy, send_bw, few iterations");
  app.add_option("--case-timeout", case_seconds, "Seconds each case may take, its servers and client together")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));
  app.add_option("--junit", junit_file, "Also write JUnit XML for CI test reporters to FILE")
      ->type_name("FILE")
      ->check(WritableFile());
  app.add_option("--tools-dir", tools_dir, "Where the tools are (default: beside rdma_smoke)")->type_name("DIR");
  auto* serve_flag =
      app.add_flag("--serve", serve,
                   "Serve a peer's run (rdma_smoke --peer) on this host: its servers forward, its clients reverse");
  auto* peer_option =
      app.add_option("--peer", peer, "Run the cases against rdma_smoke --serve on this address")->excludes(serve_flag);
  app.add_option("--direction", direction,
                 "--peer: forward (clients here, servers on the peer), reverse (servers here, clients on the "
                 "peer) or both, each tool's case in each direction")
      ->capture_default_str()
      ->check(CLI::IsMember({"forward", "reverse", "both"}))
      ->needs(peer_option);
  app.add_option("--control-port", control_port, "TCP port the two sides talk on")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  app.add_option("--accept-timeout", accept_seconds, "--serve: seconds to wait for the peer")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 86400.0));
  app.add_option("--key-file", key_file,
                 "--serve, --peer: the control channel's pre-shared key (a file only its user may read, mode "
                 "0600); each side must prove it holds the same key before anything is run")
      ->type_name("FILE");
  peers.add_to(app, smoke_gate);
  app.footer(
      "Exit status: 0 every case passed (skips allowed), 1 a case failed, 2 usage error, 77 no RDMA device at all, "
      "130/143 stopped.");
}

// The tools run under this program's prefix (rdmakit-rdma_smoke runs rdmakit-rping), as the
// runner reads it from this program's name, not compiled in: a build folder reconfigured
// for a package keeps working from bin/, where the tools have their plain names.
void SmokeOptions::check(const ToolRunner& runner, const SmokeHost& host) const {
  // Any address will do: the plan is made only to refuse unknown tool names now.
  (void)plan_cases(plan_for(*this, "192.0.2.1", 5));
  for (const auto& address : addresses) host.numeric(address);
  if (!peer.empty()) host.numeric(peer);
  if ((serve || !peer.empty()) && addresses.size() > 1) {
    throw UsageError("--serve and --peer take at most one address (this host's)");
  }
  if (!peers.allow.empty() && !serve) throw UsageError("--allow goes with --serve");
  if (!key_file.empty()) {
    if (!serve && peer.empty()) throw UsageError("--key-file goes with --serve or --peer");
    (void)read_shared_key(key_file);
  }
  const auto dir = smoke::tools_dir(*this);
  if (!fs::exists(dir / runner.names().sibling("rping"))) {
    throw UsageError("no rdmakit tools in " + dir.string() + " (--tools-dir)");
  }
}

void run_smoke(const SmokeOptions& options, const ToolRunner& runner, const SmokeHost& host, Report& report) {
  const StopSignal stop;
  const auto started = Clock::now();
  const auto dir = tools_dir(options);
  const RunEnvironment environment{
      .program = [&dir, &runner](const std::string& tool) { return (dir / runner.names().sibling(tool)).string(); },
      .listening = host.listening,
      .stop_fd = stop.fd()};
  SmokeRun run;
  std::string peer_lost;
  try {
    peer_lost = run_cases(options, host, runner.common().timeout_s, environment, runner.names().sibling("rdma_smoke"),
                          run, report);
  } catch (const std::exception& error) {
    // Ended before its cases could (the key handshake, the plan): the JUnit XML still says so.
    // The report's error is the exception's, as ToolRunner records it.
    if (!options.junit_file.empty()) {
      run.seconds = elapsed_ms(started) / 1000.0;
      run.aborted = error.what();
      try {
        write_junit(options.junit_file, junit_xml(run, host_name()));
      } catch (const std::exception& unwritten) {
        spdlog::warn("{}", unwritten.what());  // the run's own error is the one to report
      }
    }
    throw;
  }
  // diag-bind alone, where there is nothing to test, checks the host with no address.
  for (const auto& c : run.cases) {
    if (!c.address.empty() && std::ranges::find(run.addresses, c.address) == run.addresses.end()) {
      run.addresses.push_back(c.address);
    }
  }
  run.seconds = elapsed_ms(started) / 1000.0;
  finish_report(std::move(run), options, report);
  if (!peer_lost.empty()) {
    report.fail({.message = "the peer was lost: " + peer_lost, .call = "", .errnum = 0, .hint = "", .completion = {}});
  }
}

}  // namespace rdmakit::smoke
