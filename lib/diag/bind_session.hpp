#pragma once
// diag-bind's options and its run: the host's inventory beside a real bind (or resolution) of
// the address and the verdict over both, a captured host instead (--replay), or the GID
// tables (--gids).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "lib/base/report.hpp"
#include "lib/diag/diagnosis.hpp"
#include "lib/tool/cli.hpp"

namespace rdmakit::diag {

struct BindOptions {
  std::string address;
  std::uint16_t port = 0;
  std::string port_space = "tcp";
  std::size_t registration_kib = 1024;
  std::string replay_dir;
  bool gids = false;

  // Registers diag-bind's flags, and the report's names for those whose long name is not its
  // key.
  void add_to(ToolRunner& tool);
};

// What the command line decides before anything runs: a captured host read (--replay), or
// the address resolved where the resolver answers now.
class BindSession {
 public:
  explicit BindSession(const BindOptions& options) : options_(options) {}
  // Throws UsageError for a command line that cannot work (a replay that does not read, a
  // name that does not resolve). A resolver that cannot answer now (EAI_AGAIN) is not the
  // command line's fault: run() resolves again and fails with it.
  void prepare();
  // The diagnosis (or the GID tables) into `report`.
  void run(const CommonOptions& common, Report& report);

 private:
  Target target() const;

  const BindOptions& options_;
  Diagnosis diagnosis_;
  bool resolved_ = false;
  std::string captured_address_;
};

}  // namespace rdmakit::diag
