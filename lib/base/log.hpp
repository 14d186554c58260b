#pragma once
// Logging goes to stderr so that stdout carries only results (`tool --json | jq` works).

#include <optional>
#include <string>

#include <spdlog/spdlog.h>

namespace rdmakit {

// Parses "trace|debug|info|warn|error|critical|off"; nullopt for anything else.
std::optional<spdlog::level::level_enum> parse_log_level(const std::string& name);

// Installs the default logger for `tool`, writing to stderr at `level`.
void setup_logging(const std::string& tool, spdlog::level::level_enum level);

}  // namespace rdmakit
