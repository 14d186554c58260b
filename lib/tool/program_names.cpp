#include "lib/tool/program_names.hpp"

#include <system_error>

namespace rdmakit {

std::string program_prefix(const std::string& tool, const std::string& executable, const std::string& invoked) {
  for (const auto& path : {executable, invoked}) {
    const auto file = std::filesystem::path(path).filename().string();
    if (!tool.empty() && file.ends_with(tool)) return file.substr(0, file.size() - tool.size());
  }
  return {};
}

void ProgramNames::take_invoked(const char* argv0) {
  if (argv0 == nullptr || *argv0 == '\0') return;
  invoked_ = std::filesystem::path(argv0).filename().string();
  std::error_code unreadable;  // no /proc: argv[0] alone says it
  siblings_ =
      SiblingNames(program_prefix(tool_, std::filesystem::read_symlink("/proc/self/exe", unreadable).string(), argv0));
}

std::filesystem::path ProgramNames::directory() {
  std::error_code unreadable;
  return std::filesystem::read_symlink("/proc/self/exe", unreadable).parent_path();
}

}  // namespace rdmakit
