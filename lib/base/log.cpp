#include "lib/base/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace rdmakit {

std::optional<spdlog::level::level_enum> parse_log_level(const std::string& name) {
  const auto level = spdlog::level::from_str(name);
  // from_str answers "off" for anything it does not know; only accept that for "off".
  if (level == spdlog::level::off && name != "off") {
    return std::nullopt;
  }
  return level;
}

void setup_logging(const std::string& tool, spdlog::level::level_enum level) {
  spdlog::drop(tool);
  auto logger = spdlog::stderr_color_mt(tool);
  logger->set_pattern("[%H:%M:%S.%f] [%n] [%^%l%$] %v");
  logger->set_level(level);
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace rdmakit
