#include "tests/schema/schema.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rdmakit::schema {

namespace {

using nlohmann::json;

// A schema that refers to itself without descending into the document would recurse
// forever; no real report nests anywhere near this deep.
constexpr int max_depth = 256;

constexpr std::array<std::string_view, 5> annotations = {"description", "title", "$schema", "$id", "$comment"};
constexpr std::array<std::string_view, 7> type_names = {"null",   "boolean", "object", "array",
                                                        "number", "string",  "integer"};

bool is_annotation(std::string_view keyword) {
  return std::find(annotations.begin(), annotations.end(), keyword) != annotations.end();
}

bool is_type_name(const json& name) {
  return name.is_string() &&
         std::find(type_names.begin(), type_names.end(), name.get<std::string>()) != type_names.end();
}

std::string escape_token(const std::string& key) {
  std::string out;
  for (const char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string child(const std::string& pointer, const std::string& key) {
  return pointer + "/" + escape_token(key);
}

std::string shown(const std::string& pointer) {
  return pointer.empty() ? "(root)" : pointer;
}

// A value as it appears in messages, cut short so one violation stays one readable line.
std::string brief(const json& value) {
  constexpr std::size_t limit = 80;
  auto text = value.dump();
  if (text.size() > limit) {
    text = text.substr(0, limit - 3) + "...";
  }
  return text;
}

std::string kind_of(const json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number_float()) return "number";
  return value.type_name();
}

bool has_type(const json& value, const std::string& type) {
  if (type == "integer") {
    if (value.is_number_integer()) return true;
    if (!value.is_number_float()) return false;
    const auto x = value.get<double>();
    return std::isfinite(x) && std::trunc(x) == x;
  }
  if (type == "number") return value.is_number();
  if (type == "null") return value.is_null();
  if (type == "boolean") return value.is_boolean();
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  return false;
}

// Characters, not bytes: JSON Schema counts code points.
std::size_t code_points(const std::string& text) {
  return static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string type_text(const json& type) {
  if (type.is_string()) return type.get<std::string>();
  std::string text;
  for (const auto& name : type) {
    text += (text.empty() ? "" : " or ") + name.get<std::string>();
  }
  return text;
}

bool is_count(const json& value) {
  return value.is_number_unsigned() || (value.is_number_integer() && value.get<std::int64_t>() >= 0);
}

std::filesystem::path file_key(const std::string& from_file, const std::string& ref_file) {
  return (std::filesystem::path(from_file).parent_path() / ref_file).lexically_normal();
}

json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) {
    throw std::runtime_error("cannot read " + path.string());
  }
  try {
    return json::parse(in);
  } catch (const json::parse_error& error) {
    throw std::runtime_error(path.string() + " is not valid JSON: " + error.what());
  }
}

}  // namespace

struct Validator::Context {
  std::string file;  // whose document "#/..." references point into
  int depth = 0;
};

Validator::Validator(json schema, std::filesystem::path base_dir)
    : root_(std::move(schema)), base_dir_(std::move(base_dir)) {
  load_referenced_files(root_);
}

Validator Validator::from_file(const std::filesystem::path& path) {
  Validator validator(read_json(path), path.parent_path());
  validator.root_name_ = path.filename().string();
  return validator;
}

void Validator::load_referenced_files(const json& schema) {
  // Every "$ref" anywhere, not only where a schema is expected: a reference in an odd place
  // is still worth loading so that schema_problems() can judge it.
  std::vector<std::pair<const json*, std::string>> pending = {{&schema, ""}};
  while (!pending.empty()) {
    const auto [node, file] = pending.back();
    pending.pop_back();
    if (node->is_object()) {
      if (const auto ref = node->find("$ref"); ref != node->end() && ref->is_string()) {
        const auto text = ref->get<std::string>();
        const auto file_part = text.substr(0, text.find('#'));
        if (!file_part.empty()) {
          const auto key = file_key(file, file_part).string();
          if (!files_.contains(key)) {
            try {
              files_[key] = read_json(base_dir_ / key);
              pending.emplace_back(&files_[key], key);  // std::map nodes stay put
            } catch (const std::runtime_error& error) {
              files_[key] = nullptr;  // a schema is never null: marks the failure
              load_errors_.push_back(error.what());
            }
          }
        }
      }
    }
    if (node->is_structured()) {
      for (const auto& item : *node) pending.emplace_back(&item, file);
    }
  }
}

const json& Validator::root_of(const std::string& file) const {
  return file.empty() ? root_ : files_.at(file);
}

Validator::Target Validator::resolve(const std::string& ref, const std::string& file, std::string& error) const {
  const auto hash = ref.find('#');
  const auto file_part = ref.substr(0, hash);
  const auto fragment = hash == std::string::npos ? std::string() : ref.substr(hash + 1);
  Target target{.schema = nullptr, .file = file};
  const json* document = nullptr;
  if (file_part.empty()) {
    document = &root_of(file);
  } else {
    target.file = file_key(file, file_part).string();
    const auto it = files_.find(target.file);
    if (it == files_.end() || it->second.is_null()) {
      error = "$ref \"" + ref + "\": cannot load " + (base_dir_ / target.file).string();
      return target;
    }
    document = &it->second;
  }
  if (fragment.empty()) {
    target.schema = document;
    return target;
  }
  try {
    const json::json_pointer pointer(fragment);
    if (!document->contains(pointer)) {
      error = "$ref \"" + ref + "\" does not resolve";
      return target;
    }
    target.schema = &document->at(pointer);
  } catch (const json::exception&) {
    error = "$ref \"" + ref + "\": the fragment is not a JSON pointer";
  }
  return target;
}

std::vector<std::string> Validator::validate(const json& document) const {
  std::vector<std::string> out;
  try {
    check(root_, document, "", Context{.file = "", .depth = 0}, out);
  } catch (const json::exception& error) {
    // A malformed keyword value (schema_problems() names it) must not end the program.
    out.push_back(std::string("(schema): malformed keyword value: ") + error.what());
  }
  return out;
}

void Validator::check(const json& schema, const json& value, const std::string& pointer, const Context& context,
                      std::vector<std::string>& out) const {
  if (context.depth > max_depth) {
    out.push_back(shown(pointer) + ": schema nests deeper than " + std::to_string(max_depth) + " ($ref cycle?)");
    return;
  }
  if (schema.is_boolean()) {
    if (!schema.get<bool>()) out.push_back(shown(pointer) + ": not allowed here");
    return;
  }
  if (!schema.is_object()) {
    out.push_back(shown(pointer) + ": the schema for this is not an object or a boolean");
    return;
  }
  if (const auto type = schema.find("type"); type != schema.end()) {
    const bool ok = type->is_array() ? std::any_of(type->begin(), type->end(),
                                                   [&](const json& t) { return has_type(value, t.get<std::string>()); })
                                     : has_type(value, type->get<std::string>());
    if (!ok) {
      // Nothing else about a value of the wrong type is worth reading.
      out.push_back(shown(pointer) + ": expected " + type_text(*type) + ", got " + kind_of(value));
      return;
    }
  }
  for (const auto& [keyword, argument] : schema.items()) {
    if (keyword == "$ref") {
      std::string error;
      const auto target = resolve(argument.get<std::string>(), context.file, error);
      if (target.schema == nullptr) {
        out.push_back(shown(pointer) + ": " + error);
      } else {
        check(*target.schema, value, pointer, Context{.file = target.file, .depth = context.depth + 1}, out);
      }
    } else if (keyword == "enum") {
      if (std::find(argument.begin(), argument.end(), value) == argument.end()) {
        out.push_back(shown(pointer) + ": " + brief(value) + " is not one of " + brief(argument));
      }
    } else if (keyword == "const") {
      if (value != argument) out.push_back(shown(pointer) + ": expected " + brief(argument) + ", got " + brief(value));
    } else if (keyword == "minimum") {
      if (value.is_number() && value.get<double>() < argument.get<double>()) {
        out.push_back(shown(pointer) + ": " + brief(value) + " is below the minimum " + brief(argument));
      }
    } else if (keyword == "maximum") {
      if (value.is_number() && value.get<double>() > argument.get<double>()) {
        out.push_back(shown(pointer) + ": " + brief(value) + " is above the maximum " + brief(argument));
      }
    } else if (keyword == "minItems") {
      if (value.is_array() && value.size() < argument.get<std::size_t>()) {
        out.push_back(shown(pointer) + ": " + std::to_string(value.size()) + " item(s), fewer than " + brief(argument));
      }
    } else if (keyword == "maxItems") {
      if (value.is_array() && value.size() > argument.get<std::size_t>()) {
        out.push_back(shown(pointer) + ": " + std::to_string(value.size()) + " item(s), more than " + brief(argument));
      }
    } else if (keyword == "minLength") {
      if (value.is_string() && code_points(value.get<std::string>()) < argument.get<std::size_t>()) {
        out.push_back(shown(pointer) + ": string shorter than " + brief(argument) + " character(s)");
      }
    } else if (keyword == "items") {
      if (value.is_array()) {
        for (std::size_t i = 0; i < value.size(); ++i) {
          check(argument, value[i], child(pointer, std::to_string(i)), context, out);
        }
      }
    } else if (keyword == "allOf") {
      for (const auto& part : argument) check(part, value, pointer, context, out);
    } else if (keyword == "type" || keyword == "properties" || keyword == "required" ||
               keyword == "additionalProperties" || keyword == "anyOf" || keyword == "oneOf" || keyword == "$defs" ||
               is_annotation(keyword)) {
      // Not per keyword: whether a property is additional depends on "properties", and an
      // alternative's failure is only one if all of them fail; type has already passed.
    } else {
      out.push_back(shown(pointer) + ": the schema uses the unsupported keyword \"" + keyword + "\"");
    }
  }
  check_object(schema, value, pointer, context, out);
  check_alternatives(schema, value, pointer, context, out);
}

void Validator::check_object(const json& schema, const json& value, const std::string& pointer, const Context& context,
                             std::vector<std::string>& out) const {
  if (!value.is_object()) return;
  const auto properties = schema.find("properties");
  if (const auto required = schema.find("required"); required != schema.end()) {
    for (const auto& name : *required) {
      if (!value.contains(name.get<std::string>())) {
        out.push_back(shown(pointer) + ": missing required property " + name.dump());
      }
    }
  }
  const auto additional = schema.find("additionalProperties");
  for (const auto& [key, item] : value.items()) {
    const auto where = child(pointer, key);
    if (properties != schema.end() && properties->contains(key)) {
      check(properties->at(key), item, where, context, out);
    } else if (additional != schema.end()) {
      if (additional->is_boolean() && !additional->get<bool>()) {
        out.push_back(where + ": undocumented property (additionalProperties is false)");
      } else {
        check(*additional, item, where, context, out);
      }
    }
  }
}

void Validator::check_alternatives(const json& schema, const json& value, const std::string& pointer,
                                   const Context& context, std::vector<std::string>& out) const {
  for (const char* keyword : {"anyOf", "oneOf"}) {
    const auto alternatives = schema.find(keyword);
    if (alternatives == schema.end()) continue;
    std::vector<std::vector<std::string>> results;
    std::vector<std::size_t> matched;
    for (const auto& alternative : *alternatives) {
      results.emplace_back();
      check(alternative, value, pointer, context, results.back());
      if (results.back().empty()) matched.push_back(results.size());
    }
    const std::string name = keyword;
    if (matched.empty()) {
      // The alternatives that came closest usually tell what is wrong. One whose type does not
      // even fit is far away whatever its count (a null-or-object field holding a bad object).
      const auto type_miss = shown(pointer) + ": expected ";
      const auto type_miss_end = ", got " + kind_of(value);
      std::vector<std::size_t> scores;
      for (const auto& lines : results) {
        const bool wrong_type = std::any_of(lines.begin(), lines.end(), [&](const std::string& line) {
          return line.starts_with(type_miss) && line.ends_with(type_miss_end);
        });
        scores.push_back(lines.size() + (wrong_type ? 1000 : 0));
      }
      const auto best = *std::min_element(scores.begin(), scores.end());
      std::string numbers;
      for (std::size_t k = 0; k < results.size(); ++k) {
        if (scores[k] == best) numbers += (numbers.empty() ? "" : ", ") + std::to_string(k + 1);
      }
      const bool several = numbers.find(',') != std::string::npos;
      out.push_back(shown(pointer) + ": matches none of the " + std::to_string(results.size()) + " alternatives of " +
                    name + "; the closest, alternative" + (several ? "s " : " ") + numbers + ", fail" +
                    (several ? "" : "s") + ":");
      for (std::size_t k = 0; k < results.size(); ++k) {
        if (scores[k] != best) continue;
        for (const auto& line : results[k]) {
          out.push_back("  " + line + " [" + name + " alternative " + std::to_string(k + 1) + " at " + shown(pointer) +
                        "]");
        }
      }
    } else if (name == "oneOf" && matched.size() > 1) {
      std::string list;
      for (const auto index : matched) list += (list.empty() ? "" : ", ") + std::to_string(index);
      out.push_back(shown(pointer) + ": matches alternatives " + list + " of oneOf; exactly one must match");
    }
  }
}

std::vector<std::string> Validator::schema_problems() const {
  std::vector<std::string> out = load_errors_;
  lint(root_, "", "", out);
  for (const auto& [file, document] : files_) {
    if (!document.is_null()) lint(document, file, "", out);
  }
  return out;
}

void Validator::lint(const json& schema, const std::string& file, const std::string& pointer,
                     std::vector<std::string>& out) const {
  const auto where = (file.empty() ? root_name_ : file) + "#" + pointer + ": ";
  if (schema.is_boolean()) return;
  if (!schema.is_object()) {
    out.push_back(where + "not a schema (an object or a boolean)");
    return;
  }
  for (const auto& [keyword, argument] : schema.items()) {
    const auto at = child(pointer, keyword);
    if (is_annotation(keyword)) {
      if (!argument.is_string()) out.push_back(where + keyword + " must be a string");
    } else if (keyword == "$ref") {
      std::string error;
      if (!argument.is_string()) {
        out.push_back(where + "$ref must be a string");
      } else if (resolve(argument.get<std::string>(), file, error).schema == nullptr) {
        out.push_back(where + error);
      }
    } else if (keyword == "type") {
      const bool ok = is_type_name(argument) || (argument.is_array() && !argument.empty() &&
                                                 std::all_of(argument.begin(), argument.end(), is_type_name));
      if (!ok) out.push_back(where + "type must be a type name or an array of them, not " + brief(argument));
    } else if (keyword == "properties" || keyword == "$defs") {
      if (!argument.is_object()) {
        out.push_back(where + keyword + " must be an object");
        continue;
      }
      for (const auto& [name, sub] : argument.items()) lint(sub, file, child(at, name), out);
    } else if (keyword == "required") {
      const bool ok = argument.is_array() &&
                      std::all_of(argument.begin(), argument.end(), [](const json& n) { return n.is_string(); });
      if (!ok) out.push_back(where + "required must be an array of strings");
    } else if (keyword == "additionalProperties" || keyword == "items") {
      lint(argument, file, at, out);
    } else if (keyword == "enum") {
      if (!argument.is_array() || argument.empty()) out.push_back(where + "enum must be a non-empty array");
    } else if (keyword == "const") {
      // any value
    } else if (keyword == "minimum" || keyword == "maximum") {
      if (!argument.is_number()) out.push_back(where + keyword + " must be a number");
    } else if (keyword == "minItems" || keyword == "maxItems" || keyword == "minLength") {
      if (!is_count(argument)) out.push_back(where + keyword + " must be a non-negative integer");
    } else if (keyword == "allOf" || keyword == "anyOf" || keyword == "oneOf") {
      if (!argument.is_array() || argument.empty()) {
        out.push_back(where + keyword + " must be a non-empty array");
        continue;
      }
      for (std::size_t i = 0; i < argument.size(); ++i) lint(argument[i], file, child(at, std::to_string(i)), out);
    } else {
      out.push_back(where + "unsupported keyword \"" + keyword + "\"");
    }
  }
}

std::vector<std::string> validate(const json& schema, const json& document, const std::filesystem::path& base_dir) {
  return Validator(schema, base_dir).validate(document);
}

}  // namespace rdmakit::schema
