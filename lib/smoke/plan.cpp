#include "lib/smoke/plan.hpp"

#include <fmt/format.h>
#include <algorithm>

#include "lib/base/error.hpp"
#include "lib/base/named_values.hpp"

namespace rdmakit::smoke {

namespace {

// The tools' own flags in one place: every case passes its --timeout and --json, and a
// server an --accept-timeout, so no tool can wait longer than its case allows.
struct CaseBuilder {
  const PlanOptions& options;
  std::uint16_t next_port;

  static std::string seconds(double value) { return fmt::format("{:g}", value); }
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
    c.direction = options.direction;
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

// The words every case builder needs: the address to serve and reach, this host's, the
// message count and ucmatose's connections.
struct Words {
  std::string address;
  std::string here;
  std::string count;
  std::string connections;
};

Words words_of(const PlanOptions& o) {
  return {.address = o.address,
          .here = o.local_address.empty() ? o.address : o.local_address,
          .count = o.quick ? "3" : "10",
          .connections = o.quick ? "2" : "8"};
}

// A case whose one server listens on a port of its own; `server` and `client` get that port.
using ArgsForPort = std::vector<std::string> (*)(const Words& w, const std::string& port);

SmokeCase listening_case(CaseBuilder& b, const std::string& name, const std::string& server_tool, ArgsForPort server,
                         const std::string& client_tool, ArgsForPort client) {
  auto c = b.make(name, name);
  c.port = b.take_port();
  const auto w = words_of(b.options);
  const auto port = std::to_string(c.port);
  c.servers = {{server_tool, b.serving(server(w, port))}};
  c.client = {client_tool, b.common(client(w, port))};
  return c;
}

void add_diag_bind(CaseBuilder& b, std::vector<SmokeCase>& cases) {
  auto c = b.make("diag-bind", "diag-bind");
  const auto here = words_of(b.options).here;
  c.client = {"diag-bind", b.common(here.empty() ? std::vector<std::string>{} : std::vector<std::string>{here})};
  cases.push_back(std::move(c));
}

void add_rping(CaseBuilder& b, std::vector<SmokeCase>& cases) {
  cases.push_back(listening_case(
      b, "rping", "rping",
      [](const Words& w, const std::string& p) {
        return std::vector<std::string>{"-s", "-a", w.address, "-p", p};
      },
      "rping",
      [](const Words& w, const std::string& p) {
        return std::vector<std::string>{"-c", "-a", w.address, "-p", p, "-C", w.count, "-V"};
      }));
}

void add_rdma_server(CaseBuilder& b, std::vector<SmokeCase>& cases) {
  cases.push_back(listening_case(
      b, "rdma_server", "rdma_server",
      [](const Words& w, const std::string& p) {
        return std::vector<std::string>{"-s", w.address, "-p", p};
      },
      "rdma_client",
      [](const Words& w, const std::string& p) {
        return std::vector<std::string>{"-s", w.address, "-p", p, "-C", w.count};
      }));
}

void add_udaddy(CaseBuilder& b, std::vector<SmokeCase>& cases) {
  cases.push_back(listening_case(
      b, "udaddy", "udaddy",
      [](const Words& w, const std::string& p) {
        return std::vector<std::string>{"-b", w.address, "--port", p, "-C", w.count};
      },
      "udaddy",
      [](const Words& w, const std::string& p) {
        return std::vector<std::string>{"-s", w.address, "--port", p, "-C", w.count};
      }));
}

void add_ucmatose(CaseBuilder& b, std::vector<SmokeCase>& cases) {
  cases.push_back(listening_case(
      b, "ucmatose", "ucmatose",
      [](const Words& w, const std::string& p) {
        return std::vector<std::string>{"-b", w.address, "-p", p, "-c", w.connections, "-C", w.count};
      },
      "ucmatose",
      [](const Words& w, const std::string& p) {
        return std::vector<std::string>{"-s", w.address, "-p", p, "-c", w.connections, "-C", w.count};
      }));
}

void add_mckey(CaseBuilder& b, std::vector<SmokeCase>& cases) {
  auto c = b.make("mckey", "mckey");
  const auto w = words_of(b.options);
  const auto group = multicast_group(w.address, b.options.first_port);
  // The receiver says it joined at info level; the sender waits for nobody (--settle 0).
  c.servers = {{"mckey", b.common({"-m", group, "-b", w.address, "-C", w.count, "--log-level", "info"})}};
  c.ready_line = "joined";
  c.client = {"mckey", b.common({"-m", group, "-b", w.here, "-s", "-C", w.count, "--settle", "0"})};
  cases.push_back(std::move(c));
}

void add_send_bw(CaseBuilder& b, std::vector<SmokeCase>& cases) {
  const auto w = words_of(b.options);
  const std::string iterations = b.options.quick ? "200" : "1000";
  for (const bool latency : {false, true}) {
    if (latency && b.options.quick) continue;
    auto c = b.make(latency ? "send_bw.latency" : "send_bw.bandwidth", "send_bw");
    c.port = b.take_port();
    const auto port = std::to_string(c.port);
    c.servers = {{"send_bw", b.serving({"--bind", w.address, "-p", port})}};
    std::vector<std::string> args{w.address, "-p", port, "-n", iterations};
    args.insert(args.end(), latency ? std::initializer_list<std::string>{"--lat", "-s", "64"}
                                    : std::initializer_list<std::string>{"-s", "65536"});
    c.client = {"send_bw", b.common(args)};
    cases.push_back(std::move(c));
  }
}

using CaseAdder = void (*)(CaseBuilder& b, std::vector<SmokeCase>& cases);

// smoke_tools() in its order, each with the cases it adds.
const std::vector<std::pair<std::string, CaseAdder>>& adders() {
  static const std::vector<std::pair<std::string, CaseAdder>> table{
      {"diag-bind", add_diag_bind}, {"rping", add_rping}, {"rdma_server", add_rdma_server}, {"udaddy", add_udaddy},
      {"ucmatose", add_ucmatose},   {"mckey", add_mckey}, {"send_bw", add_send_bw}};
  return table;
}

}  // namespace

std::string to_string(Direction direction) {
  return std::string(name_in(direction_names, direction, "local"));
}

PlanOptions reversed(const PlanOptions& forward) {
  auto options = forward;
  options.address = forward.local_address;
  options.local_address = forward.address;
  // Past the forward cases' ports (at most 8), as each further address of a local run.
  options.first_port = static_cast<std::uint16_t>(forward.first_port + ports_per_plan);
  options.direction = Direction::reverse;
  return options;
}

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
  for (const auto& [tool, add] : adders()) {
    if (!selected(options, tool)) continue;
    if (options.quick && options.tools.empty() && std::ranges::find(quick_tools, tool) == quick_tools.end()) continue;
    add(builder, cases);
  }
  if (cases.empty()) throw UsageError("--tools and --skip leave no case to run");
  if (options.direction == Direction::reverse) {
    for (auto& c : cases) c.name += ".reverse";
  }
  // diag-bind alone checks the host without an address; every other case needs one.
  if (options.address.empty() && std::ranges::any_of(cases, [](const SmokeCase& c) { return c.tool != "diag-bind"; })) {
    throw UsageError("no address to test");
  }
  return cases;
}

}  // namespace rdmakit::smoke
