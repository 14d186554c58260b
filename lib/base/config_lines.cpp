#include "lib/base/config_lines.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "lib/base/error.hpp"

namespace rdmakit {
namespace {

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

std::string_view uncommented(std::string_view line) {
  const std::size_t hash = line.find('#');
  if (hash != std::string_view::npos) line = line.substr(0, hash);
  while (!line.empty() && is_blank(line.back())) line.remove_suffix(1);
  return line;
}

}  // namespace

std::vector<std::string_view> words_in(std::string_view line) {
  std::vector<std::string_view> words;
  std::size_t at = 0;
  while (at < line.size()) {
    while (at < line.size() && is_blank(line[at])) ++at;
    const std::size_t start = at;
    while (at < line.size() && !is_blank(line[at])) ++at;
    if (at > start) words.push_back(line.substr(start, at - start));
  }
  return words;
}

std::vector<NumberedLine> entries_of(std::string_view text, bool join_continued) {
  std::vector<NumberedLine> lines;
  NumberedLine pending;
  bool continuing = false;
  std::size_t number = 0;
  while (!text.empty()) {
    ++number;
    const std::size_t newline = text.find('\n');
    std::string_view line = uncommented(text.substr(0, newline));
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    if (!continuing) pending = NumberedLine{{}, number};
    continuing = join_continued && !line.empty() && line.back() == '\\';
    if (continuing) line.remove_suffix(1);
    pending.text.append(line);
    if (!continuing && !words_in(pending.text).empty()) lines.push_back(std::exchange(pending, {}));
  }
  if (continuing && !words_in(pending.text).empty()) lines.push_back(std::move(pending));
  return lines;
}

std::string read_config_text(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) throw UsageError(fmt::format("{}: cannot read it: a folder", path));
  std::ifstream file(path);
  if (!file) throw UsageError(fmt::format("{}: cannot read it", path));
  std::stringstream text;
  text << file.rdbuf();
  if (file.bad()) throw UsageError(fmt::format("{}: cannot read it", path));
  return text.str();
}

}  // namespace rdmakit
