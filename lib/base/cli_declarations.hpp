#pragma once
// CLI11's classes as the option groups' headers name them (add_to(CLI::App&), a kept
// CLI::Option*): declared, not defined. CLI11 is header-only and its header defines
// validators at namespace scope: every file that included it compiled them again, about 3 s
// of a tool's 4 s main. Only the sources that declare options include <CLI/CLI.hpp>
// (lib/tool/cli_checks.hpp for our validators).

namespace CLI {
class App;
class Option;
class Validator;
}  // namespace CLI
