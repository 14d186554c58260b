// Option handling as udaddy and ucmatose run it: ToolRunner's app with the common options
// (--json, --timeout, --log-level, -d, --version, --diagnose, --json-file) and the shared
// connection flags of lib/cm_tools/group_session (-s -b -f -c -C -S -t --accept-timeout), parsed by
// CLI11, then CommonOptions::check() and the address-format check, as ToolRunner::run()
// does before any RDMA call. What is accepted must be in range for the code that uses
// it; what is rejected must still make a usage report that can be printed as JSON.
//
// Input: argv, one argument per line; the first names the tool (udaddy: -S up to 65536,
// anything else ucmatose's limits). Each tool's own options (lib/*/*_session) are not here.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "fuzz_support.hpp"
#include "lib/base/error.hpp"
#include "lib/base/log.hpp"
#include "lib/base/report.hpp"
#include "lib/cm_tools/group_session.hpp"
#include "lib/rdma/connection_group.hpp"
#include "lib/tool/cli.hpp"

namespace {

using namespace rdmakit;

// ToolRunner::usage_error() with --json: the message quotes the offending argument.
void check_usage_report(const std::string& tool, const std::string& message) {
  Report report;
  report.tool = tool;
  report.fail(ErrorRecord{.message = message, .call = {}, .errnum = 0, .hint = {}, .completion = {}}, ExitCode::usage);
  FUZZ_CHECK(!nlohmann::json::parse(json_text(to_json(report)), nullptr, false).is_discarded());
}

void check_accepted(const std::string& tool, const CommonOptions& common, const ConnectionFlags& flags,
                    std::uint32_t max_size, const nlohmann::json& arguments) {
  FUZZ_CHECK(common.timeout_s > 0.0 && common.timeout_s <= 3600.0);
  // Sub-millisecond timeouts truncate to 0 ms (see README.md); never negative or beyond an hour.
  FUZZ_CHECK(common.timeout().count() >= 0 && common.timeout().count() <= 3'600'000);
  FUZZ_CHECK(parse_log_level(common.log_level).has_value());

  FUZZ_CHECK(flags.connections >= 1 && flags.connections <= 1024);
  FUZZ_CHECK(flags.count <= 16384);
  FUZZ_CHECK(flags.size >= 1 && flags.size <= max_size);
  if (flags.type_of_service) FUZZ_CHECK(*flags.type_of_service >= 0 && *flags.type_of_service <= 255);
  FUZZ_CHECK(flags.accept_timeout_s >= 0.0 && flags.accept_timeout_s <= 86400.0);
  FUZZ_CHECK(flags.format == "name" || flags.format == "ip" || flags.format == "ipv6" || flags.format == "gid");

  const auto space = tool == "udaddy" ? RDMA_PS_UDP : RDMA_PS_TCP;
  const auto options = flags.group_options(space, common, -1);
  FUZZ_CHECK(options.connections == flags.connections && options.message_size == flags.size &&
             options.message_count == flags.count);
  FUZZ_CHECK(options.accept_timeout && options.accept_timeout->count() >= 0 &&
             options.accept_timeout->count() <= 86'400'000);
  FUZZ_CHECK(options.limits.timeout == common.timeout());

  // The run's report carries the arguments verbatim: any bytes a shell can pass.
  Report report;
  report.tool = tool;
  report.arguments = arguments;
  FUZZ_CHECK(!nlohmann::json::parse(json_text(to_json(report)), nullptr, false).is_discarded());
}

void check_port_space(const std::string& text) {
  try {
    const auto space = parse_port_space(text);
    FUZZ_CHECK(parse_port_space(port_space_name(space)) == space);
  } catch (const UsageError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto words = fuzz::split_lines(fuzz::as_text(data, size), 64);
  if (words.empty()) words.emplace_back("ucmatose");
  const std::string tool_name = words.front() == "udaddy" ? "udaddy" : "ucmatose";
  const std::uint32_t max_size = tool_name == "udaddy" ? 65536 : 1u << 30;

  ToolRunner tool(tool_name, "fuzzing");
  tool.enable_diagnose();
  tool.enable_json_file();
  ConnectionFlags flags;
  flags.port = 7471;
  flags.add_to(tool, "Messages each way per connection", max_size, "Message bytes");

  // argv as the kernel hands it over: C strings, so an embedded NUL ends an argument.
  std::vector<char*> argv;
  for (auto& word : words) argv.push_back(word.data());
  try {
    tool.app().parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::Success&) {
    FUZZ_CHECK(!tool.app().help().empty());  // --help and --version end the run here
    return 0;
  } catch (const CLI::ParseError& error) {
    check_usage_report(tool_name, error.what());
    return 0;
  }
  try {
    tool.common().check();
    addressing_hints(flags.format, RDMA_PS_TCP);
  } catch (const UsageError& error) {
    check_usage_report(tool_name, error.what());
    return 0;
  }
  check_accepted(tool_name, tool.common(), flags, max_size, arguments_of(tool.app()));
  check_port_space(words.back());
  return 0;
}
