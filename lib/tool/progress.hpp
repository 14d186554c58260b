#pragma once
// Progress of long work on stderr while it runs, so that a sweep or a mesh is not silent
// until its report: lines that stay (a sweep's rows, a timed run's intervals) and one status
// line rewritten in place (rdma_mesh's rounds). stdout keeps the report alone.

#include <string>
#include <string_view>

#include "lib/base/cli_declarations.hpp"

namespace rdmakit {

// --progress and --quiet. Progress is shown when stderr is a terminal; --progress shows it
// elsewhere too (a CI log), --quiet never.
struct ProgressOptions {
  bool quiet = false;
  bool forced = false;

  void add_to(CLI::App& app);
  // Whether to show progress; `asked` is a tool's own reason to (send_bw --run_infinitely).
  bool shown(bool asked = false) const;
};

class Progress {
 public:
  // `terminal`: a status line is rewritten in place; elsewhere each status is a line of its own.
  Progress(bool enabled, bool terminal);
  // Shown when `options` say so, on a terminal when stderr is one.
  static Progress for_stderr(const ProgressOptions& options, bool asked = false);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  Progress(Progress&&) = delete;
  Progress& operator=(Progress&&) = delete;
  ~Progress();

  bool enabled() const { return enabled_; }
  // Lines that stay; `text` ends with a newline.
  void lines(std::string_view text);
  // One line that the next status replaces (on a terminal).
  void status(std::string_view text);
  // Ends a pending status line, so that what follows on stderr starts on a line of its own.
  void end_status();

 private:
  bool enabled_;
  bool terminal_;
  bool status_pending_ = false;
};

}  // namespace rdmakit
