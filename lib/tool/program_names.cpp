#include "lib/tool/program_names.hpp"

#include <cctype>
#include <system_error>

#include <nlohmann/json.hpp>

namespace rdmakit {

namespace {

// Whether a sibling's name at [at, end) of `text` stands as a word a person would type: after
// the start, a space, a quote or a bracket ("run diag-bind on node08", "'diag-connect
// --serve'", "(diag-bind 10.0.0.1)"), and not followed by more of a name. Not inside a path
// (doc/schema/diag-bind.schema.json) or a longer name (rdmakit-diag-bind).
bool names_a_sibling(std::string_view text, std::size_t at, std::size_t end) {
  constexpr std::string_view before = " \t\n'\"`(";
  if (at > 0 && before.find(text[at - 1]) == std::string_view::npos) return false;
  if (end == text.size()) return true;
  const auto after = static_cast<unsigned char>(text[end]);
  if (std::isalnum(after) != 0 || after == '-' || after == '_' || after == '/') return false;
  return !(after == '.' && end + 1 < text.size() && std::isalnum(static_cast<unsigned char>(text[end + 1])) != 0);
}

}  // namespace

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
  prefix_ = program_prefix(tool_, std::filesystem::read_symlink("/proc/self/exe", unreadable).string(), argv0);
}

std::filesystem::path ProgramNames::directory() {
  std::error_code unreadable;
  return std::filesystem::read_symlink("/proc/self/exe", unreadable).parent_path();
}

std::string ProgramNames::with_sibling_names(const std::string& text) const {
  if (prefix_.empty()) return text;
  std::string named;
  named.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    bool renamed = false;
    for (const std::string_view sibling : {"diag-bind", "diag-connect"}) {
      if (text.compare(at, sibling.size(), sibling) == 0 && names_a_sibling(text, at, at + sibling.size())) {
        named += prefix_;
        named += sibling;
        at += sibling.size();
        renamed = true;
        break;
      }
    }
    if (!renamed) named += text[at++];
  }
  return named;
}

void ProgramNames::with_sibling_names(nlohmann::json& value, std::string_view key) const {
  if (prefix_.empty()) return;
  if (value.is_string() && key != "tool") {
    value = with_sibling_names(value.get<std::string>());
  } else if (value.is_object()) {
    for (auto item = value.begin(); item != value.end(); ++item) with_sibling_names(item.value(), item.key());
  } else if (value.is_array()) {
    for (auto& item : value) with_sibling_names(item, key);
  }
}

}  // namespace rdmakit
