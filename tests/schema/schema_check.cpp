// schema_check SCHEMA.json DOC.json...: validates tool reports against their schema (see
// doc/schema). Prints one "DOC: POINTER: problem" line per violation. Exit 0 when every
// document is valid, 1 when one is not (or is not JSON), 2 for a usage error or a schema
// that is itself broken, so a broken schema is never mistaken for a bad report.

#include <exception>
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/schema/schema.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: schema_check SCHEMA.json DOC.json...\n";
    return 2;
  }
  const std::string schema_path = argv[1];
  try {
    const auto validator = rdmakit::schema::Validator::from_file(schema_path);
    if (const auto problems = validator.schema_problems(); !problems.empty()) {
      for (const auto& problem : problems) std::cerr << "schema_check: " << problem << "\n";
      return 2;
    }
    int status = 0;
    for (int i = 2; i < argc; ++i) {
      const std::string path = argv[i];
      std::ifstream in(path);
      if (!in) {
        std::cerr << "schema_check: cannot read " << path << "\n";
        return 2;
      }
      nlohmann::json document;
      try {
        document = nlohmann::json::parse(in);
      } catch (const nlohmann::json::parse_error& error) {
        std::cout << path << ": not valid JSON: " << error.what() << "\n";
        status = 1;
        continue;
      }
      for (const auto& violation : validator.validate(document)) {
        std::cout << path << ": " << violation << "\n";
        status = 1;
      }
    }
    return status;
  } catch (const std::exception& error) {
    std::cerr << "schema_check: " << error.what() << "\n";
    return 2;
  }
}
