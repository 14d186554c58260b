#pragma once
// Shared by the fuzz targets: invariant checks that stop the run where libFuzzer (or the
// replay driver) reports them as a crash, and the line splitting the text-shaped inputs use.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/base/error.hpp"

// abort() rather than an exception: a target must never be able to swallow its own
// verdict, and libFuzzer saves the input for any deadly signal.
#define FUZZ_CHECK(condition)                                                                  \
  do {                                                                                         \
    if (!(condition)) {                                                                        \
      std::fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                            \
    }                                                                                          \
  } while (false)

namespace rdmakit::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Lines without their '\n'; text-shaped seeds stay readable and editable this way.
inline std::vector<std::string> split_lines(std::string_view text, std::size_t max_lines) {
  std::vector<std::string> lines;
  while (!text.empty() && lines.size() < max_lines) {
    const auto end = text.find('\n');
    lines.emplace_back(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
  }
  return lines;
}

// What `decode` returns, or nothing when it throws ProtocolError (the one exception a
// decoder may throw for bad input; anything else escapes, and libFuzzer reports it).
template <class Decode>
auto decoded(Decode&& decode) -> std::optional<decltype(decode())> {
  try {
    return decode();
  } catch (const ProtocolError&) {
    return std::nullopt;
  }
}

// Whether `decode` takes its input: true unless it throws ProtocolError (anything else
// escapes, and libFuzzer reports it).
template <class Decode>
bool accepts(Decode&& decode) {
  try {
    decode();
    return true;
  } catch (const ProtocolError&) {
    return false;
  }
}

}  // namespace rdmakit::fuzz
