#include "lib/base/described_json.hpp"

#include <algorithm>

namespace rdmakit::described {

namespace {

// A tab may appear in a text (a firewall rule's); any other control character would reach the
// terminal that prints it.
bool printable(const std::string& text) {
  return std::ranges::none_of(text, [](const unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; });
}

}  // namespace

std::string Path::text() const {
  if (parent_ == nullptr) return std::string(root_);
  auto parent = parent_->text();
  if (is_index_) return fmt::format("{}[{}]", parent, index_);
  return parent.empty() ? std::string(key_) : fmt::format("{}.{}", parent, key_);
}

void reject(const Path& path, std::string_view what) {
  const auto where = path.text();
  throw ProtocolError(fmt::format("{}: {}", where.empty() ? "the document" : where, what));
}

void read_text(const nlohmann::json& json, const Path& path, std::string& out, const ReadLimits& limits) {
  if (!json.is_string()) reject(path, "expected a string");
  const auto& text = json.get_ref<const std::string&>();
  if (text.size() > limits.max_text_bytes) {
    reject(path, fmt::format("{} bytes, more than the {} allowed", text.size(), limits.max_text_bytes));
  }
  if (!printable(text)) reject(path, "holds a control character");
  out = text;
}

void read_number(const nlohmann::json& json, const Path& path, double& out) {
  if (!json.is_number()) reject(path, "expected a number");
  out = json.get<double>();
}

void read_boolean(const nlohmann::json& json, const Path& path, bool& out) {
  if (!json.is_boolean()) reject(path, "expected true or false");
  out = json.get<bool>();
}

void read_array(const nlohmann::json& json, const Path& path, const ReadLimits& limits) {
  if (!json.is_array()) reject(path, "expected an array");
  if (json.size() > limits.max_list_entries) {
    reject(path, fmt::format("{} entries, more than the {} allowed", json.size(), limits.max_list_entries));
  }
}

void read_object(const nlohmann::json& json, const Path& path) {
  if (!json.is_object()) reject(path, "expected an object");
}

}  // namespace rdmakit::described
