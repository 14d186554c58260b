#pragma once
// What the unit tests hold the code's tables to: a report schema of doc/schema and a page of
// man/, read from the source tree.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace rdmakit::testing {

inline const std::filesystem::path source_root = RDMAKIT_SOURCE_DIR;

// doc/schema/NAME.schema.json ("rping", "common").
inline nlohmann::json report_schema(const std::string& name) {
  std::ifstream in(source_root / "doc" / "schema" / (name + ".schema.json"));
  return nlohmann::json::parse(in);
}

// man/PAGE ("rdmakit.7"), whole.
inline std::string man_page(const std::string& page) {
  std::ifstream in(source_root / "man" / page);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace rdmakit::testing
