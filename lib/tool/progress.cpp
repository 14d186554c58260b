#include "lib/tool/progress.hpp"

#include <unistd.h>

#include <iostream>

#include <CLI/CLI.hpp>

namespace rdmakit {

void ProgressOptions::add_to(CLI::App& app) {
  auto* progress =
      app.add_flag("--progress", forced, "Show progress on stderr also when it is not a terminal (a CI log)");
  app.add_flag("--quiet", quiet, "No progress on stderr, only the report (and errors)")->excludes(progress);
}

bool ProgressOptions::shown(bool asked) const {
  if (quiet) return false;
  return forced || asked || isatty(STDERR_FILENO) == 1;
}

Progress::Progress(bool enabled, bool terminal) : enabled_(enabled), terminal_(terminal) {}

Progress Progress::for_stderr(const ProgressOptions& options, bool asked) {
  return Progress(options.shown(asked), isatty(STDERR_FILENO) == 1);
}

Progress::~Progress() {
  end_status();
}

void Progress::lines(std::string_view text) {
  if (!enabled_) return;
  end_status();
  std::cerr << text << std::flush;
}

void Progress::status(std::string_view text) {
  if (!enabled_) return;
  if (terminal_) {
    // Back to the line's start and clear it: the new status replaces the old one.
    std::cerr << "\r\033[K" << text << std::flush;
    status_pending_ = true;
  } else {
    std::cerr << text << '\n' << std::flush;
  }
}

void Progress::end_status() {
  if (!status_pending_) return;
  std::cerr << '\n' << std::flush;
  status_pending_ = false;
}

}  // namespace rdmakit
