// rdma_smoke: the suite as one smoke test. Each tool's server and client run as child
// processes on one address (loopback through the RDMA device), each case bounded in time,
// and the results come as a table, a JSON report and JUnit XML for CI test reporters.

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
#include "lib/smoke/smoke_report.hpp"

#ifndef RDMAKIT_PROGRAM_PREFIX
#define RDMAKIT_PROGRAM_PREFIX ""
#endif

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
};

void add_options(CLI::App& app, Options& o) {
  app.add_option("address", o.addresses, "Addresses to test, each on its own (default: every RDMA port's address)");
  app.add_option("-p,--port", o.first_port, "First rdma_cm port; each case that listens takes the next one")
      ->capture_default_str()
      ->check(CLI::Range(1, 65000));
  app.add_option(
         "--tools", o.tools,
         "Only these tools (comma-separated): " + fmt::format("{}", fmt::join(rdmakit::smoke::smoke_tools(), ",")))
      ->delimiter(',');
  app.add_option("--skip", o.skip, "Not these tools (comma-separated)")->delimiter(',');
  app.add_flag("--quick", o.quick, "The smallest meaningful run: diag-bind, rping, udaddy, send_bw, few iterations");
  app.add_option("--case-timeout", o.case_seconds, "Seconds each case may take, its servers and client together")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));
  app.add_option("--junit", o.junit_file, "Also write JUnit XML for CI test reporters to FILE")->type_name("FILE");
  app.add_option("--tools-dir", o.tools_dir, "Where the tools are (default: beside rdma_smoke)")->type_name("DIR");
}

// The tools installed beside this program (with its install prefix), never ones found on
// PATH: rdmacm-utils installs stock tools of the same names.
fs::path tools_dir(const Options& o) {
  if (!o.tools_dir.empty()) return o.tools_dir;
  return fs::read_symlink("/proc/self/exe").parent_path();
}

void validate(const Options& o) {
  rdmakit::smoke::PlanOptions plan{.address = "192.0.2.1",
                                   .first_port = o.first_port,
                                   .quick = o.quick,
                                   .timeout_s = 5,
                                   .case_seconds = o.case_seconds,
                                   .tools = o.tools,
                                   .skip = o.skip};
  // Any address will do: the plan is made only to refuse unknown tool names now.
  (void)rdmakit::smoke::plan_cases(plan);
  for (const auto& address : o.addresses) rdmakit::parse_address(address, 0);
  const auto dir = tools_dir(o);
  if (!fs::exists(dir / (std::string(RDMAKIT_PROGRAM_PREFIX) + "rping"))) {
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

void write_junit(const std::string& file, const rdmakit::smoke::SmokeRun& run) {
  if (file.empty()) return;
  std::ofstream out(file);
  out << rdmakit::smoke::junit_xml(run, host_name());
  if (!out) throw std::runtime_error("cannot write " + file);
}

}  // namespace

int main(int argc, char** argv) {
  rdmakit::ToolRunner runner("rdma_smoke", "Run the rdmakit tools as one smoke test: does RDMA work on this host?");
  Options options;
  runner.rename_argument("port", "first_port");
  runner.rename_argument("address", "addresses");
  add_options(runner.app(), options);
  runner.app().footer(
      "Exit status: 0 every case passed (skips allowed), 1 a case failed, 2 usage error, 77 no RDMA device at all, "
      "130/143 stopped.");
  return runner.run(
      argc, argv, [&] { validate(options); },
      [&](rdmakit::Report& report) {
        const rdmakit::StopSignal stop;
        const auto started = rdmakit::Clock::now();
        const auto dir = tools_dir(options);
        const rdmakit::smoke::RunEnvironment environment{
            .program = [&dir](const std::string& tool) { return (dir / (RDMAKIT_PROGRAM_PREFIX + tool)).string(); },
            .listening = listening_on,
            .stop_fd = stop.fd()};
        rdmakit::smoke::SmokeRun run;
        rdmakit::diag::ProbeOptions probe;
        const auto inventory = rdmakit::diag::collect_inventory(probe);
        run.addresses = options.addresses;
        if (run.addresses.empty()) {
          for (const auto& choice : rdmakit::diag::every_port_address(inventory))
            run.addresses.push_back(choice.address);
        }
        const auto timeout_s = runner.common().timeout_s;
        if (inventory.kernel_devices.empty() || run.addresses.empty()) {
          // Nothing to test: diag-bind alone, whose verdict says why.
          rdmakit::smoke::PlanOptions plan{.address = run.addresses.empty() ? "" : run.addresses.front(),
                                           .first_port = options.first_port,
                                           .quick = true,
                                           .timeout_s = timeout_s,
                                           .case_seconds = options.case_seconds,
                                           .tools = {"diag-bind"},
                                           .skip = {}};
          auto result = rdmakit::smoke::run_case(rdmakit::smoke::plan_cases(plan).front(), environment);
          run.no_device = result.runs.empty() ? nlohmann::json() : result.runs.front().report;
          run.cases.push_back(std::move(result));
        } else {
          std::uint16_t port = options.first_port;
          for (const auto& address : run.addresses) {
            rdmakit::smoke::PlanOptions plan{.address = rdmakit::parse_address(address, 0).host_string(),
                                             .first_port = port,
                                             .quick = options.quick,
                                             .timeout_s = timeout_s,
                                             .case_seconds = options.case_seconds,
                                             .tools = options.tools,
                                             .skip = options.skip};
            for (const auto& smoke_case : rdmakit::smoke::plan_cases(plan)) {
              run.cases.push_back(rdmakit::smoke::run_case(smoke_case, environment));
              std::cerr << fmt::format("{} {}: {}\n", smoke_case.name, address, to_string(run.cases.back().outcome));
              if (run.cases.back().interrupted) break;
            }
            port = static_cast<std::uint16_t>(port + 16);
            if (!run.cases.empty() && run.cases.back().interrupted) break;
          }
        }
        run.seconds = rdmakit::elapsed_ms(started) / 1000.0;
        const bool interrupted = !run.cases.empty() && run.cases.back().interrupted;
        if (run.no_device) {
          report.fail({.message = "no RDMA device to test", .call = "", .errnum = 0, .hint = "", .completion = {}},
                      rdmakit::ExitCode::no_device);
        } else if (interrupted) {
          report.stop(rdmakit::StopReason::interrupted, "stopped by a signal");
        } else if (run.count(CaseOutcome::failed) > 0) {
          report.fail(
              {.message = fmt::format("{} of {} cases failed", run.count(CaseOutcome::failed), run.cases.size()),
               .call = "",
               .errnum = 0,
               .hint = "",
               .completion = {}});
        }
        report.iterations_requested = run.cases.size();
        report.iterations_completed = run.count(CaseOutcome::passed);
        write_junit(options.junit_file, run);
        report.add(rdmakit::smoke::SmokeResult(std::move(run)));
      });
}
