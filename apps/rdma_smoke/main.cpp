// rdma_smoke: the suite as one smoke test. Each tool's server and client run as child
// processes on one address (loopback through the RDMA device), or across two hosts
// (--serve on one, --peer on the other), each case bounded in time; the results come as a
// table, a JSON report and JUnit XML for CI test reporters.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/core/cli.hpp"
#include "lib/diag/address_choice.hpp"
#include "lib/probe/host_probe.hpp"
#include "lib/probe/host_view.hpp"
#include "lib/rdma/cm.hpp"
#include "lib/smoke/remote.hpp"
#include "lib/smoke/smoke_report.hpp"

namespace {

namespace fs = std::filesystem;
using rdmakit::smoke::CaseOutcome;

struct Options {
  std::vector<std::string> addresses;
  std::uint16_t first_port = 19400;
  std::vector<std::string> tools;
  std::vector<std::string> skip;
  bool quick = false;
  double case_seconds = 60;
  std::string junit_file;
  std::string tools_dir;
  bool serve = false;
  std::string peer;
  std::string direction = "both";
  std::uint16_t control_port = rdmakit::smoke::default_control_port;
  double accept_seconds = 600;
};

void add_options(CLI::App& app, Options& o) {
  app.add_option("address", o.addresses,
                 "Addresses to test, each on its own (default: every RDMA port's address); with --serve, the one "
                 "this host's servers listen on");
  app.add_option("-p,--port", o.first_port, "First rdma_cm port; each case that listens takes the next one")
      ->capture_default_str()
      ->check(CLI::Range(1, 65000));
  app.add_option(
         "--tools", o.tools,
         "Only these tools (comma-separated): " + fmt::format("{}", fmt::join(rdmakit::smoke::smoke_tools(), ",")))
      ->allow_extra_args(false)
      ->delimiter(',');
  // One value a flag: without it the addresses after --tools would be taken for tools.
  app.add_option("--skip", o.skip, "Not these tools (comma-separated)")->allow_extra_args(false)->delimiter(',');
  app.add_flag("--quick", o.quick, "The smallest meaningful run: diag-bind, rping, udaddy, send_bw, few iterations");
  app.add_option("--case-timeout", o.case_seconds, "Seconds each case may take, its servers and client together")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));
  app.add_option("--junit", o.junit_file, "Also write JUnit XML for CI test reporters to FILE")
      ->type_name("FILE")
      ->check(rdmakit::WritableFile());
  app.add_option("--tools-dir", o.tools_dir, "Where the tools are (default: beside rdma_smoke)")->type_name("DIR");
  auto* serve =
      app.add_flag("--serve", o.serve,
                   "Serve a peer's run (rdma_smoke --peer) on this host: its servers forward, its clients reverse");
  auto* peer =
      app.add_option("--peer", o.peer, "Run the cases against rdma_smoke --serve on this address")->excludes(serve);
  app.add_option("--direction", o.direction,
                 "--peer: forward (clients here, servers on the peer), reverse (servers here, clients on the "
                 "peer) or both, each tool's case in each direction")
      ->capture_default_str()
      ->check(CLI::IsMember({"forward", "reverse", "both"}))
      ->needs(peer);
  app.add_option("--control-port", o.control_port, "TCP port the two sides talk on")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  app.add_option("--accept-timeout", o.accept_seconds, "--serve: seconds to wait for the peer")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 86400.0));
}

// The tools installed beside this program, never ones found on PATH: rdmacm-utils installs
// stock tools of the same names.
fs::path tools_dir(const Options& o) {
  if (!o.tools_dir.empty()) return o.tools_dir;
  return fs::read_symlink("/proc/self/exe").parent_path();
}

std::string numeric(const std::string& host) {
  return rdmakit::parse_address(host, 0).host_string();
}

// The tools run under this program's prefix (rdmakit-rdma_smoke runs rdmakit-rping), as the
// runner reads it from this program's name, not compiled in: a build folder reconfigured
// for a package keeps working from bin/, where the tools have their plain names.
void validate(const Options& o, const rdmakit::ToolRunner& runner) {
  // Any address will do: the plan is made only to refuse unknown tool names now.
  rdmakit::smoke::PlanOptions plan{.address = "192.0.2.1",
                                   .local_address = {},
                                   .first_port = o.first_port,
                                   .quick = o.quick,
                                   .timeout_s = 5,
                                   .case_seconds = o.case_seconds,
                                   .tools = o.tools,
                                   .skip = o.skip};
  (void)rdmakit::smoke::plan_cases(plan);
  for (const auto& address : o.addresses) numeric(address);
  if (!o.peer.empty()) numeric(o.peer);
  if ((o.serve || !o.peer.empty()) && o.addresses.size() > 1) {
    throw rdmakit::UsageError("--serve and --peer take at most one address (this host's)");
  }
  const auto dir = tools_dir(o);
  if (!fs::exists(dir / runner.sibling("rping"))) {
    throw rdmakit::UsageError("no rdmakit tools in " + dir.string() + " (--tools-dir)");
  }
}

bool listening_on(std::uint16_t port, pid_t pid) {
  rdmakit::diag::HostView view;
  if (!rdmakit::diag::read_cm_listeners(view)) return false;
  return std::ranges::any_of(view.listeners, [port, pid](const rdmakit::diag::CmListener& l) {
    return l.port == port && l.pid == static_cast<std::uint32_t>(pid);
  });
}

std::string host_name() {
  std::array<char, 256> name{};
  return gethostname(name.data(), name.size() - 1) == 0 ? std::string(name.data()) : std::string();
}

void write_junit(const std::string& file, const std::string& xml) {
  if (file.empty()) return;
  std::ofstream out(file);
  out << xml;
  if (!out) throw std::runtime_error("--junit: cannot write " + file);
}

rdmakit::smoke::PlanOptions plan_for(const Options& o, const std::string& address, double timeout_s) {
  return {.address = address,
          .local_address = {},
          .first_port = o.first_port,
          .quick = o.quick,
          .timeout_s = timeout_s,
          .case_seconds = o.case_seconds,
          .tools = o.tools,
          .skip = o.skip};
}

void progress(const rdmakit::smoke::CaseResult& result) {
  std::cerr << fmt::format("{} {}: {}\n", result.name, result.address, to_string(result.outcome));
}

// This host alone: every case on each address; diag-bind alone where there is nothing to test.
void run_here(const Options& o, const std::vector<std::string>& addresses, double timeout_s,
              const rdmakit::smoke::RunEnvironment& environment, rdmakit::smoke::SmokeRun& run) {
  if (addresses.empty()) {
    auto plan = plan_for(o, "", timeout_s);
    plan.tools = {"diag-bind"};
    plan.skip.clear();
    auto result = rdmakit::smoke::run_case(rdmakit::smoke::plan_cases(plan).front(), environment);
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
    return;
  }
  auto plan = plan_for(o, "", timeout_s);
  for (const auto& address : addresses) {
    plan.address = numeric(address);
    for (const auto& smoke_case : rdmakit::smoke::plan_cases(plan)) {
      run.cases.push_back(rdmakit::smoke::run_case(smoke_case, environment));
      progress(run.cases.back());
      if (run.cases.back().interrupted) return;
    }
    plan.first_port = static_cast<std::uint16_t>(plan.first_port + rdmakit::smoke::ports_per_plan);
  }
}

// Across the wire to rdma_smoke --serve on the peer: each case forward (the client here),
// reverse (the servers here), or both.
void run_against_peer(const Options& o, const std::string& local, double timeout_s,
                      const rdmakit::smoke::RunEnvironment& environment, rdmakit::smoke::SmokeRun& run) {
  rdmakit::smoke::PeerPlan plan{.forward = plan_for(o, numeric(o.peer), timeout_s),
                                .run_forward = o.direction != "reverse",
                                .run_reverse = o.direction != "forward"};
  plan.forward.local_address = local;
  auto channel = rdmakit::smoke::ControlChannel::connect_to(
      plan.forward.address, o.control_port, rdmakit::Clock::now() + std::chrono::seconds(30), environment.stop_fd);
  rdmakit::smoke::PeerSession session(std::move(channel), plan);
  for (const auto& smoke_case : rdmakit::smoke::peer_cases(plan)) {
    try {
      run.cases.push_back(session.run_case(smoke_case, environment));
    } catch (const std::exception& lost) {
      // The serving side went away or broke the protocol: this case fails with why, and the
      // report keeps the cases before it.
      auto result = rdmakit::smoke::result_of(smoke_case);
      result.reason = std::string("the serving side: ") + lost.what();
      result.interrupted = dynamic_cast<const rdmakit::RunStopped*>(&lost) != nullptr &&
                           dynamic_cast<const rdmakit::RunStopped&>(lost).reason() == rdmakit::StopReason::interrupted;
      run.cases.push_back(std::move(result));
      progress(run.cases.back());
      return;
    }
    progress(run.cases.back());
    if (run.cases.back().interrupted) return;
  }
  session.done();
}

void finish_report(rdmakit::smoke::SmokeRun run, const Options& o, rdmakit::Report& report) {
  const bool interrupted = !run.cases.empty() && run.cases.back().interrupted;
  if (run.no_device) {
    const auto& verdict = run.no_device->is_object() ? run.no_device->value("verdict", nlohmann::json::object())
                                                     : nlohmann::json::object();
    report.fail({.message = "nothing to test: " + verdict.value("summary", std::string("no RDMA port with an address")),
                 .call = "",
                 .errnum = 0,
                 .hint = "",
                 .completion = {}},
                rdmakit::ExitCode::no_device);
  } else if (interrupted) {
    report.stop(rdmakit::StopReason::interrupted, "stopped by a signal");
  } else if (run.count(CaseOutcome::failed) > 0) {
    report.fail({.message = fmt::format("{} of {} cases failed", run.count(CaseOutcome::failed), run.cases.size()),
                 .call = "",
                 .errnum = 0,
                 .hint = "",
                 .completion = {}});
  }
  // The report keeps the results even when the XML cannot be written.
  const auto xml = o.junit_file.empty() ? std::string() : rdmakit::smoke::junit_xml(run, host_name());
  report.add(rdmakit::smoke::SmokeResult(std::move(run)));
  write_junit(o.junit_file, xml);
}

}  // namespace

int main(int argc, char** argv) {
  rdmakit::ToolRunner runner("rdma_smoke", "Run the rdmakit tools as one smoke test: does RDMA work on this host?");
  // Its tools connect and measure, each in its own report; its cases are counted in "smoke".
  runner.report_groups({.connection = false, .measurement = false});
  Options options;
  runner.rename_argument("port", "first_port");
  runner.rename_argument("address", "addresses");
  add_options(runner.app(), options);
  runner.app().footer(
      "Exit status: 0 every case passed (skips allowed), 1 a case failed, 2 usage error, 77 no RDMA device at all, "
      "130/143 stopped.");
  return runner.run(
      argc, argv, [&] { validate(options, runner); },
      [&](rdmakit::Report& report) {
        const rdmakit::StopSignal stop;
        const auto started = rdmakit::Clock::now();
        const auto dir = tools_dir(options);
        const rdmakit::smoke::RunEnvironment environment{
            .program = [&dir, &runner](const std::string& tool) { return (dir / runner.sibling(tool)).string(); },
            .listening = listening_on,
            .stop_fd = stop.fd()};
        rdmakit::smoke::SmokeRun run;
        std::string peer_lost;
        const auto inventory = rdmakit::diag::collect_inventory(rdmakit::diag::ProbeOptions{});
        std::vector<std::string> addresses = options.addresses;
        if (addresses.empty() && !inventory.kernel_devices.empty()) {
          for (const auto& choice : rdmakit::diag::every_port_address(inventory)) addresses.push_back(choice.address);
        }
        const auto timeout_s = runner.common().timeout_s;
        if (inventory.kernel_devices.empty() || addresses.empty()) {
          run_here(options, {}, timeout_s, environment, run);
        } else if (options.serve) {
          report.role = "server";
          auto served = rdmakit::smoke::serve_smoke(
              {.address = numeric(addresses.front()),
               .bind = {},
               .control_port = options.control_port,
               .accept_seconds = options.accept_seconds},
              environment, [](const std::string& line) { std::cerr << "rdma_smoke --serve: " << line << std::endl; });
          run.cases = std::move(served.cases);
          peer_lost = served.lost;
        } else if (!options.peer.empty()) {
          report.role = "client";
          const auto route = rdmakit::diag::route_to(numeric(options.peer), "");
          const auto local = options.addresses.empty() ? route.source : numeric(options.addresses.front());
          run_against_peer(options, local, timeout_s, environment, run);
        } else {
          run_here(options, addresses, timeout_s, environment, run);
        }
        // diag-bind alone, where there is nothing to test, checks the host with no address.
        for (const auto& c : run.cases) {
          if (!c.address.empty() && std::ranges::find(run.addresses, c.address) == run.addresses.end()) {
            run.addresses.push_back(c.address);
          }
        }
        run.seconds = rdmakit::elapsed_ms(started) / 1000.0;
        finish_report(std::move(run), options, report);
        if (!peer_lost.empty()) {
          report.fail(
              {.message = "the peer was lost: " + peer_lost, .call = "", .errnum = 0, .hint = "", .completion = {}});
        }
      });
}
