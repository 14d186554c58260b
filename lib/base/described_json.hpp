#pragma once
// One description of a report section's JSON, from which its writer, its strict reader and the
// shape its schema must have all follow: a key cannot be written and forgotten by the reader,
// or documented and never written (tests/unit/described_json_test.cpp holds every registered
// shape to its schema).
//
// A description is a codec: a struct whose static `members` overloads list, for each described
// type, its keys in order with the member each holds,
//
//   static void members(Describes<GidEntry> auto& gid, auto&& visit) {
//     visit("index", gid.index);
//     visit("gid", gid.gid);
//   }
//
// and whose optional `write_leaf`, `read_leaf` and `leaf_shape` overloads say how a value type of
// its feature (an enum written by name, an exit code from a short list) is written, read and
// shaped. Strings, booleans, numbers, integers (range-checked), vectors and optionals need
// nothing. A key the report leaves out while its member holds nothing (an empty string or list,
// zero, an empty optional) is listed with `when_set`: visit("hint", error.hint, when_set).
//
// The writer writes every key (an empty optional as null) but the `when_set` ones that hold
// nothing. The reader refuses a missing key (a `when_set` one reads as its default), a wrong
// type, an out-of-range integer, a string with control characters and more entries or bytes
// than the codec's `limits` allow, naming the path ("rows[2].bytes"); keys it does not know it
// leaves alone (a newer writer's, or another section's). A codec says what a missing key means
// (`missing_keys`) and how long a text or a list may be (`limits`).

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "lib/base/error.hpp"

namespace rdmakit::described {

template <typename Object, typename Model>
concept Describes = std::same_as<std::remove_const_t<Object>, Model>;

// What a reader accepts from a peer or a file before refusing it.
struct ReadLimits {
  std::size_t max_text_bytes = 1024;
  std::size_t max_list_entries = 512;
};

// Where a value is within the document, for a refusal's message: "peer.view.netdevs[2].mtu".
// Made into text only when a refusal is thrown: a reader of a million records would otherwise
// build a path string for every key it reads. A Path refers to its parent and its root's text,
// so it lives only as long as the read that made it.
class Path {
 public:
  Path(const std::string& root) : root_(root) {}  // NOLINT(google-explicit-constructor)
  Path(const char* root) : root_(root) {}         // NOLINT(google-explicit-constructor)
  Path(const Path& parent, std::string_view key) : parent_(&parent), key_(key) {}
  Path(const Path& parent, std::size_t index) : parent_(&parent), index_(index), is_index_(true) {}
  std::string text() const;

 private:
  const Path* parent_ = nullptr;
  std::string_view root_;
  std::string_view key_;
  std::size_t index_ = 0;
  bool is_index_ = false;
};

// What a reader does with a described key the document lacks: refuse it, or (for documents
// an older version wrote, such as diag-connect's captures) keep the member's default.
enum class MissingKeys { refused, keep_defaults };

// Whether a key is always written, only while its member holds something, or as null while
// it holds nothing (see above).
enum class Key { always, when_set, null_when_unset };
inline constexpr Key when_set = Key::when_set;
inline constexpr Key null_when_unset = Key::null_when_unset;

// A member that holds nothing: what a `when_set` key is left out for.
template <typename Value>
bool unset(const Value& value) {
  if constexpr (requires { value.has_value(); }) {
    return !value.has_value();
  } else if constexpr (requires { value.empty(); }) {
    return value.empty();
  } else if constexpr (requires { value == Value{}; }) {
    return value == Value{};
  } else {
    return false;  // a struct: always written
  }
}

// A registered section: where its schema lives and the shape its description gives it.
struct SchemaShape {
  std::string schema;                   // "send_bw": doc/schema/send_bw.schema.json
  std::string pointer;                  // its definition there, "/$defs/bandwidth_row"
  nlohmann::json shape;                 // shape<Codec, Value>()
  std::vector<std::string> extra_keys;  // keys another writer adds beside (send_bw's "counters")
};

template <typename Codec, typename Value>
concept Described = requires(const Value& value) {
  Codec::members(value, [](const char*, const auto&, Key = Key::always) {});
};

template <typename Codec, typename Value>
concept CodecWrites = requires(const Value& value) {
  { Codec::write_leaf(value) } -> std::convertible_to<nlohmann::json>;
};

template <typename Codec, typename Value>
concept CodecReads = requires(const nlohmann::json& json, const Path& path, Value& out) {
  Codec::read_leaf(json, path, out);
};

template <typename Codec, typename Value>
concept CodecShapes = requires(const Value* kind) {
  { Codec::leaf_shape(kind) } -> std::convertible_to<nlohmann::json>;
};

template <typename Value>
struct IsVector : std::false_type {};
template <typename Item>
struct IsVector<std::vector<Item>> : std::true_type {};

template <typename Value>
struct IsOptional : std::false_type {};
template <typename Item>
struct IsOptional<std::optional<Item>> : std::true_type {};

template <typename Codec, typename Value>
nlohmann::json write(const Value& value) {
  if constexpr (Described<Codec, Value>) {
    nlohmann::json object = nlohmann::json::object();
    Codec::members(value, [&object](const char* key, const auto& member, Key rule = Key::always) {
      if (rule == Key::always || !unset(member)) {
        object[key] = write<Codec>(member);
      } else if (rule == Key::null_when_unset) {
        object[key] = nullptr;
      }
    });
    return object;
  } else if constexpr (CodecWrites<Codec, Value>) {
    return Codec::write_leaf(value);
  } else if constexpr (IsVector<Value>::value) {
    nlohmann::json array = nlohmann::json::array();
    for (const auto& item : value) array.push_back(write<Codec>(item));
    return array;
  } else if constexpr (IsOptional<Value>::value) {
    return value ? write<Codec>(*value) : nlohmann::json(nullptr);
  } else {
    return value;
  }
}

// The strict reader's pieces, for codecs' read_leaf overloads too.

[[noreturn]] void reject(const Path& path, std::string_view what);
void read_text(const nlohmann::json& json, const Path& path, std::string& out, const ReadLimits& limits);
void read_number(const nlohmann::json& json, const Path& path, double& out);
void read_boolean(const nlohmann::json& json, const Path& path, bool& out);
void read_array(const nlohmann::json& json, const Path& path, const ReadLimits& limits);
void read_object(const nlohmann::json& json, const Path& path);

template <std::integral Integer>
void read_integer(const nlohmann::json& json, const Path& path, Integer& out) {
  if (!json.is_number_integer()) reject(path, "expected an integer");
  const bool fits = json.is_number_unsigned() ? std::in_range<Integer>(json.get<std::uint64_t>())
                                              : std::in_range<Integer>(json.get<std::int64_t>());
  if (!fits) reject(path, fmt::format("{} is out of range", json.dump()));
  out = json.is_number_unsigned() ? static_cast<Integer>(json.get<std::uint64_t>())
                                  : static_cast<Integer>(json.get<std::int64_t>());
}

// A value of a closed table, written and read by its name: `named` finds it, `names` lists
// the table for the refusal and the shape's "enum".
template <typename Value>
void read_named(const nlohmann::json& value, const Path& path, Value& out,
                std::optional<Value> (*named)(std::string_view), const auto& names) {
  std::string name;
  read_text(value, path, name, ReadLimits{});
  const auto found = named(name);
  if (!found) reject(path, fmt::format("'{}' is not one of {}", name, fmt::join(names, ", ")));
  out = *found;
}

nlohmann::json named_shape(const auto& names) {
  nlohmann::json values = nlohmann::json::array();
  for (const auto& name : names) values.push_back(std::string(name));
  return {{"type", "string"}, {"enum", std::move(values)}};
}

// For codecs that keep a member as the JSON it came as (an embedded report, a verdict another
// tool wrote): an object, or null for none. A codec derives from it for those leaves.
struct ObjectOrNullLeaf {
  // Only for members that are JSON: every value converts to nlohmann::json.
  template <std::same_as<nlohmann::json> Value>
  static nlohmann::json write_leaf(const Value& value) {
    return value;
  }
  static void read_leaf(const nlohmann::json& value, const Path& path, nlohmann::json& out) {
    if (!value.is_object() && !value.is_null()) reject(path, "expected an object or null");
    out = value;
  }
  static nlohmann::json leaf_shape(const nlohmann::json* /*kind*/) { return {{"type", {"object", "null"}}}; }
};

template <typename Codec, typename Value>
void read(const nlohmann::json& json, const Path& path, Value& out);

// One described key of `object` into `member`, by its rule.
template <typename Codec, typename Member>
void read_member(const nlohmann::json& object, const Path& path, const char* key, Member& member, Key rule) {
  const Path key_path(path, key);
  const auto it = object.find(key);
  if (it == object.end()) {
    if (rule == Key::when_set || Codec::missing_keys == MissingKeys::keep_defaults) return;
    reject(key_path, "missing");
  }
  if constexpr (std::is_default_constructible_v<Member>) {
    if (rule == Key::null_when_unset && it->is_null()) {
      member = Member{};
      return;
    }
  }
  read<Codec>(*it, key_path, member);
}

template <typename Codec, typename Value>
void read(const nlohmann::json& json, const Path& path, Value& out) {
  if constexpr (Described<Codec, Value>) {
    read_object(json, path);
    Codec::members(out, [&json, &path](const char* key, auto& member, Key rule = Key::always) {
      read_member<Codec>(json, path, key, member, rule);
    });
  } else if constexpr (CodecReads<Codec, Value>) {
    Codec::read_leaf(json, path, out);
  } else if constexpr (IsVector<Value>::value) {
    read_array(json, path, Codec::limits);
    out.clear();
    out.resize(json.size());
    for (std::size_t i = 0; i < json.size(); ++i) read<Codec>(json[i], Path(path, i), out[i]);
  } else if constexpr (IsOptional<Value>::value) {
    if (json.is_null()) {
      out.reset();
    } else {
      read<Codec>(json, path, out.emplace());
    }
  } else if constexpr (std::is_same_v<Value, std::string>) {
    read_text(json, path, out, Codec::limits);
  } else if constexpr (std::is_same_v<Value, bool>) {
    read_boolean(json, path, out);
  } else if constexpr (std::is_floating_point_v<Value>) {
    read_number(json, path, out);
  } else {
    read_integer(json, path, out);
  }
}

// Every reader's entry: the value `document` describes, or ProtocolError naming the path of
// the first thing wrong with it (nlohmann's own exceptions, none expected past the checks
// above, become ProtocolError too, so that a caller has one type to catch).
template <typename Codec, typename Value>
Value read_document(const nlohmann::json& document, const Path& path = "") {
  Value value{};
  try {
    read<Codec>(document, path, value);
  } catch (const nlohmann::json::exception& error) {
    throw ProtocolError(std::string("unexpected JSON: ") + error.what());
  }
  return value;
}

// The schema a description implies, in JSON Schema's words: "type" (an array with "null" for
// an optional), "properties" and "required" (every key but the `when_set` ones), "items";
// a codec's leaf_shape adds what it knows (an "enum").
template <typename Codec, typename Value>
nlohmann::json shape() {
  if constexpr (Described<Codec, Value>) {
    nlohmann::json properties = nlohmann::json::object();
    nlohmann::json required = nlohmann::json::array();
    const Value model{};
    Codec::members(model, [&properties, &required](const char* key, const auto& member, Key rule = Key::always) {
      using Member = std::remove_cvref_t<decltype(member)>;
      if constexpr (IsOptional<Member>::value) {
        // Left out rather than null.
        properties[key] = rule == Key::when_set ? shape<Codec, typename Member::value_type>() : shape<Codec, Member>();
      } else if (rule == Key::null_when_unset) {
        properties[key] = shape<Codec, std::optional<Member>>();
      } else {
        properties[key] = shape<Codec, Member>();
      }
      if (rule != Key::when_set) required.push_back(key);
    });
    return {{"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(required)}};
  } else if constexpr (CodecShapes<Codec, Value>) {
    return Codec::leaf_shape(static_cast<const Value*>(nullptr));
  } else if constexpr (IsVector<Value>::value) {
    return {{"type", "array"}, {"items", shape<Codec, typename Value::value_type>()}};
  } else if constexpr (IsOptional<Value>::value) {
    auto inner = shape<Codec, typename Value::value_type>();
    inner["type"] = nlohmann::json::array({inner.value("type", ""), "null"});
    return inner;
  } else if constexpr (std::is_same_v<Value, std::string>) {
    return {{"type", "string"}};
  } else if constexpr (std::is_same_v<Value, bool>) {
    return {{"type", "boolean"}};
  } else if constexpr (std::is_floating_point_v<Value>) {
    return {{"type", "number"}};
  } else {
    static_assert(std::is_integral_v<Value>, "a described member's type needs the codec's leaf_shape");
    return {{"type", "integer"}};
  }
}

}  // namespace rdmakit::described
