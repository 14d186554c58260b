#pragma once
// What a tool is called where it runs: its own name (the report's "tool"), the name it was
// invoked by (what its messages say), and the packager's prefix its siblings are installed
// under (rdmakit-rping beside rdmakit-diag-bind), with where those siblings are.

#include <filesystem>
#include <string>
#include <string_view>

#include "lib/base/sibling_names.hpp"

namespace rdmakit {

// The packager's prefix of a tool's program ("rdmakit-" for rdmakit-rping), "" for none:
// what the executable's file name has before `tool`, else what the name it was invoked by
// has, else "". The file comes first because it is what the package installed beside its
// siblings, whatever a symlink or argv[0] calls it.
std::string program_prefix(const std::string& tool, const std::string& executable, const std::string& invoked);

class ProgramNames {
 public:
  // Before argv is read: invoked as `tool`, no prefix.
  explicit ProgramNames(std::string tool) : tool_(std::move(tool)), invoked_(tool_) {}

  // From argv[0] and /proc/self/exe; nothing for an empty argv[0].
  void take_invoked(const char* argv0);

  const std::string& tool() const { return tool_; }
  const std::string& invoked() const { return invoked_; }
  // A sibling tool's program name under this program's prefix ("rdmakit-rping" beside
  // rdmakit-rdma_smoke): what hints name and what a tool that starts its siblings runs.
  std::string sibling(std::string_view tool) const { return siblings_(tool); }
  // The same for the hints this program builds (lib/base/sibling_names.hpp).
  const SiblingNames& siblings() const { return siblings_; }
  // Where this program's executable is, and so its siblings: never PATH (rdmacm-utils
  // installs stock tools of the same names).
  static std::filesystem::path directory();
  std::filesystem::path sibling_path(std::string_view tool) const { return directory() / sibling(tool); }

 private:
  std::string tool_;
  std::string invoked_;
  SiblingNames siblings_;
};

}  // namespace rdmakit
