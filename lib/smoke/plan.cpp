#include "lib/smoke/plan.hpp"

#include <fmt/format.h>
#include <algorithm>

#include "lib/core/error.hpp"

namespace rdmakit::smoke {

namespace {

// The tools' own flags in one place: every case passes its --timeout and --json, and a
// server an --accept-timeout, so no tool can wait longer than its case allows.
struct CaseBuilder {
  const PlanOptions& options;
  std::uint16_t next_port;

  std::string seconds(double value) const { return fmt::format("{:g}", value); }
  std::vector<std::string> common(std::vector<std::string> args) const {
    args.insert(args.end(), {"--json", "--timeout", seconds(options.timeout_s)});
    return args;
  }
  std::vector<std::string> serving(std::vector<std::string> args) const {
    args.insert(args.end(), {"--accept-timeout", seconds(options.case_seconds)});
    return common(std::move(args));
  }
  SmokeCase make(std::string name, std::string tool) const {
    SmokeCase c;
    c.name = std::move(name);
    c.tool = std::move(tool);
    c.address = options.address;
    c.seconds = options.case_seconds;
    return c;
  }
  std::uint16_t take_port() { return next_port++; }
};

void check_names(const std::vector<std::string>& names, const char* flag) {
  for (const auto& name : names) {
    if (std::ranges::find(smoke_tools(), name) == smoke_tools().end()) {
      throw UsageError(fmt::format("{}: unknown tool '{}' (one of: {})", flag, name, fmt::join(smoke_tools(), ", ")));
    }
  }
}

bool selected(const PlanOptions& options, const std::string& tool) {
  const bool chosen = options.tools.empty() || std::ranges::find(options.tools, tool) != options.tools.end();
  return chosen && std::ranges::find(options.skip, tool) == options.skip.end();
}

// An administratively scoped group (RFC 2365) per first port, so that two runs on one host
// (two addresses, two users) do not share a group.
std::string multicast_group(const std::string& address, std::uint16_t port) {
  // An IPv6 address gets an IPv6 group (site-local scope), which RoCE v2 may not carry: then
  // mckey says so and the case is a skip.
  if (address.find(':') != std::string::npos) return fmt::format("ff15::{:x}", port);
  return fmt::format("239.255.{}.{}", (port >> 8) & 0xff, port & 0xff);
}

void add_cases(CaseBuilder& b, const std::string& tool, std::vector<SmokeCase>& cases) {
  const auto& o = b.options;
  const auto& a = o.address;
  const auto& here = o.local_address.empty() ? o.address : o.local_address;
  const std::string count = o.quick ? "3" : "10";
  if (tool == "diag-bind") {
    auto c = b.make("diag-bind", tool);
    c.client = {"diag-bind", b.common(here.empty() ? std::vector<std::string>{} : std::vector<std::string>{here})};
    cases.push_back(std::move(c));
  } else if (tool == "rping") {
    auto c = b.make("rping", tool);
    c.port = b.take_port();
    const auto port = std::to_string(c.port);
    c.servers = {{"rping", b.serving({"-s", "-a", a, "-p", port})}};
    c.client = {"rping", b.common({"-c", "-a", a, "-p", port, "-C", count, "-V"})};
    cases.push_back(std::move(c));
  } else if (tool == "rdma_server") {
    auto c = b.make("rdma_server", tool);
    c.port = b.take_port();
    const auto port = std::to_string(c.port);
    c.servers = {{"rdma_server", b.serving({"-s", a, "-p", port})}};
    c.client = {"rdma_client", b.common({"-s", a, "-p", port, "-C", count})};
    cases.push_back(std::move(c));
  } else if (tool == "udaddy") {
    auto c = b.make("udaddy", tool);
    c.port = b.take_port();
    const auto port = std::to_string(c.port);
    c.servers = {{"udaddy", b.serving({"-b", a, "--port", port, "-C", count})}};
    c.client = {"udaddy", b.common({"-s", a, "--port", port, "-C", count})};
    cases.push_back(std::move(c));
  } else if (tool == "ucmatose") {
    auto c = b.make("ucmatose", tool);
    c.port = b.take_port();
    const auto port = std::to_string(c.port);
    const std::string connections = o.quick ? "2" : "8";
    c.servers = {{"ucmatose", b.serving({"-b", a, "-p", port, "-c", connections, "-C", count})}};
    c.client = {"ucmatose", b.common({"-s", a, "-p", port, "-c", connections, "-C", count})};
    cases.push_back(std::move(c));
  } else if (tool == "mckey") {
    auto c = b.make("mckey", tool);
    const auto group = multicast_group(a, b.options.first_port);
    // The receiver says it joined at info level; the sender waits for nobody (--settle 0).
    c.servers = {{"mckey", b.common({"-m", group, "-b", a, "-C", count, "--log-level", "info"})}};
    c.ready_line = "joined";
    c.client = {"mckey", b.common({"-m", group, "-b", here, "-s", "-C", count, "--settle", "0"})};
    cases.push_back(std::move(c));
  } else if (tool == "send_bw") {
    const std::string iterations = o.quick ? "200" : "1000";
    for (const bool latency : {false, true}) {
      if (latency && o.quick) continue;
      auto c = b.make(latency ? "send_bw.latency" : "send_bw.bandwidth", tool);
      c.port = b.take_port();
      const auto port = std::to_string(c.port);
      c.servers = {{"send_bw", b.serving({"--bind", a, "-p", port})}};
      std::vector<std::string> args{a, "-p", port, "-n", iterations};
      if (latency) {
        args.insert(args.end(), {"--lat", "-s", "64"});
      } else {
        args.insert(args.end(), {"-s", "65536"});
      }
      c.client = {"send_bw", b.common(args)};
      cases.push_back(std::move(c));
    }
  }
}

}  // namespace

const std::vector<std::string>& smoke_tools() {
  static const std::vector<std::string> tools{"diag-bind", "rping", "rdma_server", "udaddy",
                                              "ucmatose",  "mckey", "send_bw"};
  return tools;
}

std::vector<SmokeCase> plan_cases(const PlanOptions& options) {
  check_names(options.tools, "--tools");
  check_names(options.skip, "--skip");
  // --quick keeps one tool of each kind: the check, a connected pair, a UD pair, a measurement.
  static const std::vector<std::string> quick_tools{"diag-bind", "rping", "udaddy", "send_bw"};
  CaseBuilder builder{options, options.first_port};
  std::vector<SmokeCase> cases;
  for (const auto& tool : smoke_tools()) {
    if (!selected(options, tool)) continue;
    if (options.quick && options.tools.empty() && std::ranges::find(quick_tools, tool) == quick_tools.end()) continue;
    add_cases(builder, tool, cases);
  }
  if (cases.empty()) throw UsageError("--tools and --skip leave no case to run");
  // diag-bind alone checks the host without an address; every other case needs one.
  if (options.address.empty() && std::ranges::any_of(cases, [](const SmokeCase& c) { return c.tool != "diag-bind"; })) {
    throw UsageError("no address to test");
  }
  return cases;
}

}  // namespace rdmakit::smoke
