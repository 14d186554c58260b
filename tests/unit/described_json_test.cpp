// lib/base/described_json: one description gives the writer, the strict reader and the shape
// each registered section's schema must have; every registered shape is held to its schema
// here, so that a key cannot be written and left out of the schema, or documented and never
// written.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lib/base/described_json.hpp"
#include "lib/base/report.hpp"
#include "lib/base/stats_json.hpp"
#include "lib/diag/connect_diagnosis.hpp"
#include "lib/diag/diagnosis.hpp"
#include "lib/diag/gid_table.hpp"
#include "lib/mesh/mesh_json.hpp"
#include "lib/mesh/mesh_node.hpp"
#include "lib/net/peer_gate.hpp"
#include "lib/send_bw/bw_gate.hpp"
#include "lib/send_bw/bw_json.hpp"
#include "lib/smoke/remote.hpp"
#include "lib/smoke/smoke_report.hpp"
#include "lib/tool/persistent.hpp"
#include "tests/unit/source_docs.hpp"

namespace {

using rdmakit::ProtocolError;
using rdmakit::described::Describes;
using rdmakit::described::SchemaShape;
using rdmakit::testing::report_schema;

struct Inner {
  std::string name;
  std::optional<std::uint16_t> port;
};

struct Outer {
  std::uint32_t count = 0;
  double seconds = 0;
  bool up = false;
  std::vector<Inner> inners;
};

struct TestJson {
  static constexpr rdmakit::described::ReadLimits limits{.max_text_bytes = 8, .max_list_entries = 2};
  static constexpr auto missing_keys = rdmakit::described::MissingKeys::refused;
  static void members(Describes<Inner> auto& inner, auto&& visit) {
    visit("name", inner.name);
    visit("port", inner.port);
  }
  static void members(Describes<Outer> auto& outer, auto&& visit) {
    visit("count", outer.count);
    visit("seconds", outer.seconds);
    visit("up", outer.up);
    visit("inners", outer.inners);
  }
};

Outer sample() {
  return {.count = 3, .seconds = 1.5, .up = true, .inners = {{.name = "a", .port = 80}, {.name = "b", .port = {}}}};
}

Outer read(const nlohmann::json& document) {
  return rdmakit::described::read_document<TestJson, Outer>(document);
}

std::string refusal(const nlohmann::json& document) {
  try {
    read(document);
  } catch (const ProtocolError& error) {
    return error.what();
  }
  return "(read)";
}

TEST(DescribedJson, WritesEveryKeyAndReadsItBack) {
  const auto written = rdmakit::described::write<TestJson>(sample());
  EXPECT_EQ(written, nlohmann::json::parse(R"({"count": 3, "seconds": 1.5, "up": true,
      "inners": [{"name": "a", "port": 80}, {"name": "b", "port": null}]})"));
  const auto back = read(written);
  EXPECT_EQ(back.count, 3U);
  EXPECT_EQ(back.inners.at(0).port, std::optional<std::uint16_t>(80));
  EXPECT_FALSE(back.inners.at(1).port.has_value());
}

TEST(DescribedJson, RefusesWhatItWouldNotWriteNamingThePath) {
  auto document = rdmakit::described::write<TestJson>(sample());
  document.erase("up");
  EXPECT_EQ(refusal(document), "up: missing");
  document = rdmakit::described::write<TestJson>(sample());
  document["inners"][1]["port"] = 70000;
  EXPECT_EQ(refusal(document), "inners[1].port: 70000 is out of range");
  document["inners"][1]["port"] = "80";
  EXPECT_EQ(refusal(document), "inners[1].port: expected an integer");
  document = rdmakit::described::write<TestJson>(sample());
  document["inners"][0]["name"] = "a\x1b[2J";
  EXPECT_EQ(refusal(document), "inners[0].name: holds a control character");
  document["inners"][0]["name"] = "123456789";
  EXPECT_EQ(refusal(document), "inners[0].name: 9 bytes, more than the 8 allowed");
  document = rdmakit::described::write<TestJson>(sample());
  document["inners"].push_back(document["inners"][0]);
  EXPECT_EQ(refusal(document), "inners: 3 entries, more than the 2 allowed");
  EXPECT_EQ(refusal(nlohmann::json::array()), "the document: expected an object");
  document = rdmakit::described::write<TestJson>(sample());
  document["newer"] = 1;  // a later writer's key
  EXPECT_EQ(refusal(document), "(read)");
}

TEST(DescribedJson, ShapeIsTheSchemaTheWriterNeeds) {
  const auto shape = rdmakit::described::shape<TestJson, Outer>();
  EXPECT_EQ(shape["required"], nlohmann::json({"count", "seconds", "up", "inners"}));
  EXPECT_EQ(shape["properties"]["seconds"]["type"], "number");
  EXPECT_EQ(shape["properties"]["inners"]["items"]["properties"]["port"]["type"], nlohmann::json({"integer", "null"}));
}

// An error record leaves out what it does not know, as every report has written it.
TEST(DescribedJson, ErrorRecordsLeaveOutWhatTheyDoNotKnow) {
  EXPECT_EQ(
      rdmakit::to_json(rdmakit::ErrorRecord{.message = "m", .call = "", .errnum = 0, .hint = "", .completion = {}}),
      nlohmann::json::parse(R"({"message": "m"})"));
  const rdmakit::ErrorRecord full{
      .message = "m",
      .call = "rdma_bind_addr",
      .errnum = 19,
      .hint = "run diag-bind 10.0.0.1",
      .completion = rdmakit::CompletionStatus{.status = 12, .text = "retry", .vendor_error = 129}};
  const auto written = rdmakit::to_json(full);
  EXPECT_EQ(written, nlohmann::json::parse(R"({"message": "m", "call": "rdma_bind_addr", "errno": 19,
      "errno_name": "ENODEV", "hint": "run diag-bind 10.0.0.1",
      "completion": {"status": 12, "status_text": "retry", "vendor_error": 129}})"));
  const auto back = rdmakit::error_records_from_json(nlohmann::json::array({written}), "errors");
  ASSERT_EQ(back.size(), 1U);
  EXPECT_EQ(back[0].hint, full.hint);
  EXPECT_EQ(back[0].completion->vendor_error, 129U);
  EXPECT_THROW(rdmakit::error_records_from_json(nlohmann::json::parse(R"([{"hint": "h"}])"), "errors"), ProtocolError);
}

// ---- every registered shape against its schema ----

class SchemaCheck {
 public:
  explicit SchemaCheck(const SchemaShape& registered) : registered_(registered) {}

  std::vector<std::string> problems() {
    const auto schema = report_schema(registered_.schema);
    check(registered_.shape, {schema, schema.at(nlohmann::json::json_pointer(registered_.pointer))},
          registered_.pointer, "");
    return problems_;
  }

 private:
  // A schema node and the file it is in, which its `$ref`s are relative to.
  struct Node {
    nlohmann::json file;
    nlohmann::json node;
  };

  // `$ref`s within a file and into another (common.schema.json).
  static Node resolve(const Node& at) {
    if (!at.node.is_object() || !at.node.contains("$ref")) return at;
    const auto ref = at.node["$ref"].get<std::string>();
    const auto hash = ref.find('#');
    auto file = hash == 0 ? at.file : report_schema(ref.substr(0, ref.find(".schema.json")));
    // "diag-bind.schema.json" alone is that file's root.
    const auto pointer = hash == std::string::npos ? std::string() : ref.substr(hash + 1);
    auto node = file.at(nlohmann::json::json_pointer(pointer));
    return resolve({std::move(file), std::move(node)});
  }

  void problem(const std::string& where, const std::string& what) { problems_.push_back(where + ": " + what); }

  static std::vector<std::string> types_of(const nlohmann::json& node) {
    if (!node.contains("type")) return {};
    if (node["type"].is_string()) return {node["type"].get<std::string>()};
    return node["type"].get<std::vector<std::string>>();
  }

  // A nullable schema is written anyOf [X, {"type": "null"}] (either order): X, and whether
  // null is allowed.
  static std::pair<Node, bool> unwrap_null(const Node& at) {
    const auto& node = at.node;
    if (!node.contains("anyOf") || node.contains("type") || node.contains("properties")) return {at, false};
    Node other{at.file, nlohmann::json::object()};
    bool null = false;
    for (const auto& branch : node["anyOf"]) {
      if (branch.value("type", nlohmann::json()) == "null") {
        null = true;
      } else {
        other = resolve({at.file, branch});
      }
    }
    return {other, null};
  }

  // `inner`: where the value is within the registered section ("", "steps[]"), as its
  // extra keys name them ("ok" at the top, "steps[].ok" inside).
  void check(const nlohmann::json& shape, const Node& raw, const std::string& where, const std::string& inner) {
    const auto [at, null_branch] = unwrap_null(resolve(raw));
    const auto& node = at.node;
    auto shape_types = types_of(shape);
    const bool nullable = std::erase(shape_types, "null") > 0;
    auto schema_types = types_of(node);  // nullable also as "type": ["integer", "null"]
    const bool null_allowed = null_branch || std::erase(schema_types, "null") > 0;
    if (nullable && !null_allowed) problem(where, "may be null, the schema says not");
    if (!nullable && null_allowed) problem(where, "is never null, the schema allows it");
    if (!schema_types.empty() && schema_types != shape_types) {
      problem(where, "written as " + nlohmann::json(shape_types).dump() + ", the schema has " + node["type"].dump());
    }
    if (node.contains("enum") && shape.contains("enum")) {
      for (const auto& name : node["enum"]) {
        if (std::ranges::find(shape["enum"], name) == shape["enum"].end()) {
          problem(where, "the schema's " + name.dump() + " is no name the code reads");
        }
      }
    }
    if (shape.contains("properties")) check_object(shape, at, where, inner);
    if (shape.contains("items") && node.contains("items")) {
      check(shape["items"], {at.file, node["items"]}, where + "[]", inner + "[]");
    }
  }

  void check_object(const nlohmann::json& shape, const Node& at, const std::string& where, const std::string& inner) {
    const auto properties = at.node.value("properties", nlohmann::json::object());
    for (const auto& [key, member] : shape["properties"].items()) {
      if (!properties.contains(key)) {
        problem(where, "writes \"" + key + "\", which the schema does not document");
      } else {
        check(member, {at.file, properties[key]}, where + "." + key, inner.empty() ? key : inner + "." + key);
      }
    }
    const auto& extras = registered_.extra_keys;
    const auto described_or_extra = [&shape, &extras, &inner](const std::string& key) {
      const auto path = inner.empty() ? key : inner + "." + key;
      return shape["properties"].contains(key) || std::ranges::find(extras, path) != extras.end();
    };
    if (at.node.value("additionalProperties", true) == false) {
      for (const auto& [key, member] : properties.items()) {
        if (!described_or_extra(key)) problem(where, "the schema documents \"" + key + "\", which nothing writes");
      }
    }
    const auto written_always = shape.value("required", nlohmann::json::array());
    for (const auto& key : at.node.value("required", nlohmann::json::array())) {
      if (!described_or_extra(key.get<std::string>())) {
        problem(where, "the schema requires " + key.dump() + ", which nothing writes");
      } else if (shape["properties"].contains(key.get<std::string>()) &&
                 std::ranges::find(written_always, key) == written_always.end()) {
        problem(where, "the schema requires " + key.dump() + ", which is left out when unset");
      }
    }
  }

  const SchemaShape& registered_;
  std::vector<std::string> problems_;
};

std::vector<SchemaShape> registered_shapes() {
  auto shapes = rdmakit::diag::connect_json_shapes();
  for (auto& shape : rdmakit::stats_json_shapes()) shapes.push_back(std::move(shape));
  for (auto& shape : rdmakit::report_json_shapes()) shapes.push_back(std::move(shape));
  for (auto& shape : rdmakit::persistent_json_shapes()) shapes.push_back(std::move(shape));
  for (auto& shape : rdmakit::smoke::tool_run_shapes()) shapes.push_back(std::move(shape));
  for (auto& shape : rdmakit::diag::diag_bind_json_shapes()) shapes.push_back(std::move(shape));
  for (auto& shape : rdmakit::mesh::mesh_node_shapes()) shapes.push_back(std::move(shape));
  for (auto& shape : rdmakit::mesh::mesh_json_shapes()) shapes.push_back(std::move(shape));
  for (auto& shape : rdmakit::bw_json_shapes()) shapes.push_back(std::move(shape));
  for (auto& shape : rdmakit::gate_json_shapes()) shapes.push_back(std::move(shape));
  for (auto& shape : rdmakit::diag::gid_table_shapes()) shapes.push_back(std::move(shape));
  for (auto& shape : rdmakit::refused_peers_shapes()) shapes.push_back(std::move(shape));
  for (auto& shape : rdmakit::smoke::smoke_report_shapes()) shapes.push_back(std::move(shape));
  return shapes;
}

TEST(DescribedJson, EveryRegisteredShapeIsItsSchemas) {
  const auto shapes = registered_shapes();
  EXPECT_GE(shapes.size(), 56U);
  for (const auto& registered : shapes) {
    const auto problems = SchemaCheck(registered).problems();
    EXPECT_TRUE(problems.empty()) << registered.schema << ".schema.json#" << registered.pointer << ":\n  "
                                  << fmt::format("{}", fmt::join(problems, "\n  "));
  }
}

// The check finds what it is for: a key written and not documented, one documented and not
// written, a type that differs.
TEST(DescribedJson, SchemaCheckFindsDrift) {
  auto registered = rdmakit::stats_json_shapes().at(1);
  registered.shape["properties"]["bw_peak_gbit_per_s"] = {{"type", "number"}};
  registered.shape["properties"].erase("seconds");
  registered.shape["properties"]["iterations"]["type"] = "number";
  const auto problems = SchemaCheck(registered).problems();
  const std::set<std::string> found(problems.begin(), problems.end());
  EXPECT_TRUE(
      found.contains("/$defs/bandwidth_row: writes \"bw_peak_gbit_per_s\", which the schema does not document"));
  EXPECT_TRUE(found.contains("/$defs/bandwidth_row: the schema documents \"seconds\", which nothing writes"));
  EXPECT_TRUE(found.contains("/$defs/bandwidth_row.iterations: written as [\"number\"], the schema has \"integer\""));
}

}  // namespace
