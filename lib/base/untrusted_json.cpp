#include "lib/base/untrusted_json.hpp"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "lib/base/error.hpp"

namespace rdmakit {

std::size_t json_nesting_depth(std::string_view bytes) {
  std::size_t depth = 0;
  std::size_t deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : bytes) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

nlohmann::json parse_untrusted_json(std::string_view bytes, std::size_t max_depth, std::string_view what) {
  if (json_nesting_depth(bytes) > max_depth) {
    throw ProtocolError(fmt::format("{} nests deeper than {} levels", what, max_depth));
  }
  try {
    return nlohmann::json::parse(bytes);
  } catch (const nlohmann::json::exception& error) {
    // "[json.exception.parse_error.101] parse error at line 1, ...": the words after the tag.
    const std::string text = error.what();
    const auto end = text.find("] ");
    throw ProtocolError(
        fmt::format("{} is not JSON: {}", what, end == std::string::npos ? text : text.substr(end + 2)));
  }
}

}  // namespace rdmakit
