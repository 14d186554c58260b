#pragma once
// A validator for the subset of JSON Schema 2020-12 that doc/schema/*.schema.json use, so
// the tools' --json reports can be checked against their documentation with no dependency
// beyond nlohmann/json. Supported: boolean schemas, type (with "integer" meaning any
// integral number), properties, required, additionalProperties, items, enum, const,
// minimum, maximum, minItems, maxItems, minLength, allOf, anyOf, oneOf, $defs and $ref to
// "#/..." or "file.json#/..." (a file next to the schema that refers to it). Annotations
// (description, title, $schema, $id, $comment) are ignored; any other keyword is reported,
// so a misspelt keyword cannot silently accept everything.

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rdmakit::schema {

class Validator {
 public:
  // `base_dir` is where "file.json#..." references are read from; those files (and the
  // files they refer to) are loaded here, once.
  explicit Validator(nlohmann::json schema, std::filesystem::path base_dir = {});

  // Throws std::runtime_error when the file cannot be read or is not JSON.
  static Validator from_file(const std::filesystem::path& path);

  // One "POINTER: problem" line per violation (POINTER is a JSON pointer into `document`,
  // "(root)" for the document itself); empty when the document is valid.
  std::vector<std::string> validate(const nlohmann::json& document) const;

  // Problems with the schema itself, found without a document: references that do not
  // resolve, files that could not be loaded, unsupported keywords, malformed keyword values.
  // One "FILE#POINTER: problem" line each.
  std::vector<std::string> schema_problems() const;

 private:
  struct Context;
  struct Target {
    const nlohmann::json* schema = nullptr;
    std::string file;  // "" for the schema given to the constructor
  };

  void load_referenced_files(const nlohmann::json& schema);
  // Where `ref` leads from `file`; nullptr schema with `error` set when it does not resolve.
  Target resolve(const std::string& ref, const std::string& file, std::string& error) const;
  const nlohmann::json& root_of(const std::string& file) const;
  void check(const nlohmann::json& schema, const nlohmann::json& value, const std::string& pointer,
             const Context& context, std::vector<std::string>& out) const;
  void check_object(const nlohmann::json& schema, const nlohmann::json& value, const std::string& pointer,
                    const Context& context, std::vector<std::string>& out) const;
  void check_alternatives(const nlohmann::json& schema, const nlohmann::json& value, const std::string& pointer,
                          const Context& context, std::vector<std::string>& out) const;
  void lint(const nlohmann::json& schema, const std::string& file, const std::string& pointer,
            std::vector<std::string>& out) const;

  nlohmann::json root_;
  std::string root_name_ = "(schema)";  // how schema_problems() names the root in its lines
  std::filesystem::path base_dir_;
  std::map<std::string, nlohmann::json> files_;  // referenced files by their name in "$ref"
  std::vector<std::string> load_errors_;
};

// Convenience for one-off checks: Validator(schema, base_dir).validate(document).
std::vector<std::string> validate(const nlohmann::json& schema, const nlohmann::json& document,
                                  const std::filesystem::path& base_dir = {});

}  // namespace rdmakit::schema
