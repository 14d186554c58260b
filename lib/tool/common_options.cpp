#include "lib/tool/common_options.hpp"

#include "lib/base/log.hpp"
#include "lib/tool/cli_checks.hpp"

namespace rdmakit {

void CommonOptions::add_to(CLI::App& app, const std::string& debug_flag) {
  app.add_flag("--json", json, "Print one JSON report on stdout instead of text");
  app.add_option("--timeout", timeout_s, "Seconds to wait for any single CM event or completion")
      ->capture_default_str()
      ->check(FiniteNumber());
  const std::string debug_names = debug_flag.empty() ? "--debug" : debug_flag + ",--debug";
  app.add_flag(debug_names, debug, "Debug logging on stderr (same as --log-level debug)");
  // The set in the description is what help and shell completion show; the check itself is
  // parse_log_level's, so the spellings spdlog also takes ("warning", "err") keep working.
  const CLI::Validator known_level(
      [](std::string& name) {
        return parse_log_level(name) ? std::string()
                                     : "'" + name + "' is not one of trace, debug, info, warn, error, critical, off";
      },
      "{trace,debug,info,warn,error,critical,off}");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical or off")
      ->capture_default_str()
      ->check(known_level);
}

void CommonOptions::check() const {
  if (!(timeout_s > 0.0 && timeout_s <= 3600.0)) {
    throw UsageError("--timeout must be between 0 and 3600 seconds");
  }
  if (!parse_log_level(log_level)) {
    throw UsageError("--log-level '" + log_level + "' is not one of trace, debug, info, warn, error, critical, off");
  }
}

void ServerOptions::add_to(CLI::App& app, const std::string& persistent_help, const std::string& accept_timeout_help,
                           GateFlags flags) {
  gate = flags;
  app.add_option("--accept-timeout", accept_timeout_s, accept_timeout_help)
      ->capture_default_str()
      ->check(FiniteNumber())
      ->check(CLI::Range(0.0, 86400.0));
  app.add_flag("-P,--persistent", persistent, persistent_help);
  peers.add_to(app, gate);
}

std::optional<std::chrono::milliseconds> ServerOptions::accept_timeout() const {
  if (accept_timeout_s <= 0) {
    return std::nullopt;
  }
  return std::chrono::milliseconds(static_cast<long long>(accept_timeout_s * 1000.0));
}

}  // namespace rdmakit
