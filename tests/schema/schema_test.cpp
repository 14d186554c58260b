#include "tests/schema/schema.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

using nlohmann::json;
using rdmakit::schema::validate;
using rdmakit::schema::Validator;

const std::filesystem::path schema_dir = RDMAKIT_SCHEMA_DIR;
const std::filesystem::path samples_dir = RDMAKIT_SCHEMA_SAMPLES;
const std::vector<std::string> tools = {"rping",       "udaddy",      "ucmatose", "mckey",
                                        "rdma_server", "rdma_client", "send_bw",  "diag-bind"};

bool valid(const json& schema, const json& document) {
  return validate(schema, document).empty();
}

// Whether some violation line starts with `pointer` and mentions `text`.
bool reports(const std::vector<std::string>& lines, const std::string& pointer, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& line) {
    return line.starts_with(pointer + ":") && line.find(text) != std::string::npos;
  });
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  return text;
}

json read(const std::filesystem::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

// A scratch directory for schemas that refer to other files.
class TempDir {
 public:
  TempDir() : path_(std::filesystem::temp_directory_path() / ("schema_test." + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  void write(const std::string& name, const json& content) const {
    std::filesystem::create_directories((path_ / name).parent_path());
    std::ofstream(path_ / name) << content.dump(2);
  }

 private:
  std::filesystem::path path_;
};

TEST(Keywords, TypeNames) {
  EXPECT_TRUE(valid({{"type", "null"}}, nullptr));
  EXPECT_TRUE(valid({{"type", "boolean"}}, false));
  EXPECT_TRUE(valid({{"type", "object"}}, json::object()));
  EXPECT_TRUE(valid({{"type", "array"}}, json::array()));
  EXPECT_TRUE(valid({{"type", "string"}}, "x"));
  EXPECT_TRUE(valid({{"type", "number"}}, 1.5));
  EXPECT_TRUE(valid({{"type", "number"}}, 2));
  EXPECT_FALSE(valid({{"type", "string"}}, 1));
  EXPECT_FALSE(valid({{"type", "object"}}, json::array()));
  EXPECT_FALSE(valid({{"type", "boolean"}}, 0));
  EXPECT_FALSE(valid({{"type", "null"}}, json::object()));
  const auto lines = validate({{"type", "string"}}, 1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "(root): expected string, got integer");
}

TEST(Keywords, IntegerMeansIntegral) {
  const json schema = {{"type", "integer"}};
  EXPECT_TRUE(valid(schema, 3));
  EXPECT_TRUE(valid(schema, -3));
  EXPECT_TRUE(valid(schema, 18446744073709551615ULL));
  EXPECT_TRUE(valid(schema, 30.0));  // nlohmann writes 30.0 for a double; still integral
  EXPECT_FALSE(valid(schema, 30.5));
  EXPECT_FALSE(valid(schema, "3"));
}

TEST(Keywords, TypeArray) {
  const json schema = {{"type", {"integer", "null"}}};
  EXPECT_TRUE(valid(schema, nullptr));
  EXPECT_TRUE(valid(schema, 4));
  const auto lines = validate(schema, "4");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "(root): expected integer or null, got string");
}

TEST(Keywords, PropertiesAndRequired) {
  const json schema = {{"type", "object"},
                       {"properties", {{"a", {{"type", "integer"}}}, {"b", {{"type", "string"}}}}},
                       {"required", {"a"}}};
  EXPECT_TRUE(valid(schema, {{"a", 1}}));
  EXPECT_TRUE(valid(schema, {{"a", 1}, {"b", "x"}, {"c", true}}));  // no additionalProperties: anything goes
  EXPECT_TRUE(reports(validate(schema, {{"b", "x"}}), "(root)", "missing required property \"a\""));
  EXPECT_TRUE(reports(validate(schema, {{"a", "1"}}), "/a", "expected integer"));
  auto untyped = schema;
  untyped.erase("type");
  EXPECT_TRUE(valid(untyped, json::array()));  // object keywords ignore other types
}

TEST(Keywords, AdditionalPropertiesFalse) {
  const json schema = {{"properties", {{"a", true}}}, {"additionalProperties", false}};
  EXPECT_TRUE(valid(schema, {{"a", 1}}));
  EXPECT_TRUE(reports(validate(schema, {{"a", 1}, {"zz", 2}}), "/zz", "undocumented property"));
}

TEST(Keywords, AdditionalPropertiesSchema) {
  const json schema = {{"properties", {{"name", {{"type", "string"}}}}},
                       {"additionalProperties", {{"type", "number"}, {"minimum", 0}}}};
  EXPECT_TRUE(valid(schema, {{"name", "x"}, {"connect", 1.5}, {"accept", 0}}));
  EXPECT_TRUE(reports(validate(schema, {{"connect", -1}}), "/connect", "below the minimum"));
  EXPECT_TRUE(reports(validate(schema, {{"connect", "1"}}), "/connect", "expected number"));
}

TEST(Keywords, Items) {
  const json schema = {{"type", "array"}, {"items", {{"type", "integer"}}}};
  EXPECT_TRUE(valid(schema, {1, 2, 3}));
  const auto lines = validate(schema, {1, "2", 3, nullptr});
  EXPECT_EQ(lines.size(), 2u);
  EXPECT_TRUE(reports(lines, "/1", "expected integer"));
  EXPECT_TRUE(reports(lines, "/3", "expected integer"));
}

TEST(Keywords, EnumAndConst) {
  const json choice = {{"enum", {"a", 1, nullptr}}};
  EXPECT_TRUE(valid(choice, "a"));
  EXPECT_TRUE(valid(choice, 1.0));  // numbers compare by value
  EXPECT_TRUE(valid(choice, nullptr));
  EXPECT_TRUE(reports(validate(choice, "b"), "(root)", "is not one of"));
  EXPECT_TRUE(valid({{"const", json::object()}}, json::object()));
  EXPECT_FALSE(valid({{"const", json::object()}}, {{"a", 1}}));
  EXPECT_TRUE(reports(validate({{"const", 1}}, 2), "(root)", "expected 1, got 2"));
}

TEST(Keywords, MinimumAndMaximum) {
  const json schema = {{"minimum", 1}, {"maximum", 65535}};
  EXPECT_TRUE(valid(schema, 1));
  EXPECT_TRUE(valid(schema, 65535.0));
  EXPECT_TRUE(reports(validate(schema, 0), "(root)", "below the minimum 1"));
  EXPECT_TRUE(reports(validate(schema, 65536), "(root)", "above the maximum 65535"));
  EXPECT_TRUE(valid(schema, "not a number"));  // numeric keywords ignore other types
}

TEST(Keywords, ItemCounts) {
  const json schema = {{"minItems", 1}, {"maxItems", 2}};
  EXPECT_TRUE(valid(schema, {1}));
  EXPECT_TRUE(valid(schema, {1, 2}));
  EXPECT_TRUE(reports(validate(schema, json::array()), "(root)", "fewer than 1"));
  EXPECT_TRUE(reports(validate(schema, {1, 2, 3}), "(root)", "more than 2"));
}

TEST(Keywords, MinLengthCountsCharacters) {
  const json schema = {{"minLength", 2}};
  EXPECT_TRUE(valid(schema, "ab"));
  EXPECT_TRUE(valid(schema, "\xc3\xa9\xc3\xa9"));  // two characters, four bytes
  EXPECT_FALSE(valid(schema, "\xe2\x82\xac"));     // one character, three bytes
  EXPECT_TRUE(reports(validate(schema, ""), "(root)", "shorter than 2"));
}

TEST(Keywords, AllOf) {
  const json schema = {{"allOf", {{{"type", "integer"}}, {{"minimum", 5}}}}};
  EXPECT_TRUE(valid(schema, 6));
  EXPECT_TRUE(reports(validate(schema, 4), "(root)", "below the minimum"));
}

TEST(Keywords, AnyOfReportsTheClosestAlternative) {
  const json schema = {{"anyOf",
                        {{{"type", "object"}, {"required", {"a", "b"}}},
                         {{"type", "object"}, {"required", {"c"}}, {"properties", {{"c", {{"const", 1}}}}}}}}};
  EXPECT_TRUE(valid(schema, {{"a", 1}, {"b", 2}}));
  EXPECT_TRUE(valid(schema, {{"c", 1}}));
  const auto lines = validate(schema, {{"c", 2}});
  ASSERT_EQ(lines.size(), 2u) << joined(lines);
  EXPECT_EQ(lines[0], "(root): matches none of the 2 alternatives of anyOf; the closest, alternative 2, fails:");
  EXPECT_EQ(lines[1], "  /c: expected 1, got 2 [anyOf alternative 2 at (root)]");
}

TEST(Keywords, AnyOfLooksPastAlternativesOfAnotherType) {
  const json schema = {
      {"anyOf", {{{"type", "null"}}, {{"type", "object"}, {"properties", {{"count", {{"minimum", 1}}}}}}}}};
  const auto lines = validate(schema, {{"count", 0}});
  ASSERT_EQ(lines.size(), 2u) << joined(lines);
  EXPECT_TRUE(lines[0].ends_with("the closest, alternative 2, fails:")) << lines[0];
  EXPECT_TRUE(lines[1].starts_with("  /count: 0 is below the minimum 1")) << lines[1];
}

TEST(Keywords, AnyOfShowsEveryAlternativeThatCameAsClose) {
  const auto lines = validate({{"anyOf", {{{"const", 1}}, {{"const", 2}}}}}, 3);
  ASSERT_EQ(lines.size(), 3u) << joined(lines);
  EXPECT_TRUE(lines[0].ends_with("the closest, alternatives 1, 2, fail:")) << lines[0];
  EXPECT_EQ(lines[2], "  (root): expected 2, got 3 [anyOf alternative 2 at (root)]");
}

TEST(Keywords, OneOfWantsExactlyOne) {
  const json schema = {{"oneOf", {{{"type", "integer"}}, {{"minimum", 0}}}}};
  EXPECT_TRUE(valid(schema, -1));   // integer only
  EXPECT_TRUE(valid(schema, 1.5));  // minimum only
  EXPECT_TRUE(reports(validate(schema, 1), "(root)", "matches alternatives 1, 2 of oneOf"));
  EXPECT_TRUE(reports(validate(schema, -1.5), "(root)", "matches none of the 2 alternatives of oneOf"));
}

TEST(Keywords, BooleanSchemas) {
  EXPECT_TRUE(valid(true, 1));
  EXPECT_FALSE(valid(false, 1));
  const json schema = {{"properties", {{"errno", false}}}};
  EXPECT_TRUE(valid(schema, {{"message", "x"}}));
  EXPECT_TRUE(reports(validate(schema, {{"errno", 19}}), "/errno", "not allowed"));
}

TEST(Keywords, AnnotationsAreIgnored) {
  const json schema = {{"$schema", "https://json-schema.org/draft/2020-12/schema"},
                       {"$id", "x.schema.json"},
                       {"title", "t"},
                       {"description", "d"},
                       {"$comment", "c"},
                       {"$defs", {{"unused", {{"type", "string"}}}}}};
  EXPECT_TRUE(valid(schema, 1));
  EXPECT_TRUE(Validator(schema).schema_problems().empty());
}

TEST(Keywords, UnsupportedKeywordIsAViolation) {
  const json schema = {{"pattern", "^E"}};
  EXPECT_TRUE(reports(validate(schema, "ENODEV"), "(root)", "unsupported keyword \"pattern\""));
  const auto problems = Validator(schema).schema_problems();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "(schema)#: unsupported keyword \"pattern\"");
}

TEST(Keywords, PointersEscapeTildeAndSlash) {
  const json schema = {{"additionalProperties", false}};
  const auto lines = validate(schema, {{"a/b~c", 1}});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(lines[0].starts_with("/a~1b~0c: ")) << lines[0];
  const json nested = {{"properties", {{"rtt_us", {{"properties", {{"p99.9", {{"type", "number"}}}}}}}}}};
  EXPECT_TRUE(reports(validate(nested, {{"rtt_us", {{"p99.9", "x"}}}}), "/rtt_us/p99.9", "expected number"));
}

TEST(Refs, LocalDefinitions) {
  const json schema = {{"$defs", {{"port", {{"type", "integer"}, {"minimum", 1}, {"maximum", 65535}}}}},
                       {"properties", {{"port", {{"$ref", "#/$defs/port"}}}}}};
  EXPECT_TRUE(valid(schema, {{"port", 7174}}));
  EXPECT_TRUE(reports(validate(schema, {{"port", 0}}), "/port", "below the minimum"));
}

TEST(Refs, RefSitsBesideOtherKeywords) {
  const json schema = {{"$defs", {{"count", {{"type", "integer"}}}}},
                       {"$ref", "#/$defs/count"},
                       {"minimum", 1},
                       {"description", "annotations next to $ref are fine"}};
  EXPECT_TRUE(valid(schema, 2));
  EXPECT_FALSE(valid(schema, 0));
  EXPECT_FALSE(valid(schema, 2.5));
}

TEST(Refs, OtherFilesResolveFromTheSchemaDirectory) {
  const TempDir dir;
  // common's own "#/..." references stay inside common, not the file that referred to it.
  dir.write("common.schema.json",
            {{"$defs",
              {{"summary", {{"type", "object"}, {"properties", {{"count", {{"$ref", "#/$defs/n"}}}}}}},
               {"n", {{"type", "integer"}, {"minimum", 1}}}}}});
  dir.write("tool.schema.json", {{"$defs", {{"n", {{"type", "string"}}}}},
                                 {"properties", {{"rtt_us", {{"$ref", "common.schema.json#/$defs/summary"}}}}}});
  const auto validator = Validator::from_file(dir.path() / "tool.schema.json");
  EXPECT_TRUE(validator.schema_problems().empty()) << joined(validator.schema_problems());
  EXPECT_TRUE(validator.validate({{"rtt_us", {{"count", 3}}}}).empty());
  EXPECT_TRUE(reports(validator.validate({{"rtt_us", {{"count", 0}}}}), "/rtt_us/count", "below the minimum"));
}

TEST(Refs, UnresolvedReferencesAreSchemaProblems) {
  const TempDir dir;
  dir.write("a.schema.json", {{"properties",
                               {{"x", {{"$ref", "#/$defs/missing"}}},
                                {"y", {{"$ref", "nowhere.schema.json#/$defs/z"}}},
                                {"z", {{"$ref", "b.schema.json#/$defs/absent"}}}}}});
  dir.write("b.schema.json", {{"$defs", {{"present", true}}}});
  const auto validator = Validator::from_file(dir.path() / "a.schema.json");
  const auto problems = validator.schema_problems();
  EXPECT_EQ(problems.size(), 4u) << joined(problems);  // the unreadable file, then each reference
  EXPECT_TRUE(std::any_of(problems.begin(), problems.end(), [](const std::string& p) {
    return p.starts_with("a.schema.json#/properties/x: $ref \"#/$defs/missing\" does not resolve");
  })) << joined(problems);
  EXPECT_TRUE(reports(validator.validate({{"x", 1}}), "/x", "does not resolve"));
  EXPECT_TRUE(reports(validator.validate({{"y", 1}}), "/y", "cannot load"));
}

TEST(Refs, CyclesEndInAViolation) {
  const json schema = {{"$defs", {{"loop", {{"$ref", "#/$defs/loop"}}}}}, {"$ref", "#/$defs/loop"}};
  EXPECT_TRUE(reports(validate(schema, 1), "(root)", "($ref cycle?)"));
}

TEST(Lint, MalformedKeywordValues) {
  const json schema = {{"type", "int"}, {"required", {1}}, {"minItems", -1}, {"anyOf", json::array()}};
  const auto problems = Validator(schema).schema_problems();
  EXPECT_EQ(problems.size(), 4u) << joined(problems);
  EXPECT_FALSE(validate(schema, 1).empty());  // and validating with it does not throw
}

// ---------------------------------------------------------------------------------------
// The schemas in doc/schema

std::vector<std::filesystem::path> schema_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(schema_dir)) {
    if (entry.path().filename().string().ends_with(".schema.json")) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Every property of every object-typed schema says what it means (and its units).
void collect_undescribed(const json& node, const std::string& pointer, std::vector<std::string>& out) {
  if (node.is_object()) {
    const auto type = node.find("type");
    const bool is_object_schema =
        type != node.end() &&
        (*type == "object" || (type->is_array() && std::find(type->begin(), type->end(), "object") != type->end()));
    if (is_object_schema && node.contains("properties")) {
      for (const auto& [name, property] : node.at("properties").items()) {
        if (!property.is_object() || !property.contains("description") || !property.at("description").is_string() ||
            property.at("description").get<std::string>().empty()) {
          out.push_back(pointer + "/properties/" + name);
        }
      }
    }
    for (const auto& [key, child] : node.items()) collect_undescribed(child, pointer + "/" + key, out);
  } else if (node.is_array()) {
    for (std::size_t i = 0; i < node.size(); ++i) collect_undescribed(node[i], pointer + "/" + std::to_string(i), out);
  }
}

TEST(Schemas, EveryToolHasOne) {
  for (const auto& tool : tools) {
    EXPECT_TRUE(std::filesystem::exists(schema_dir / (tool + ".schema.json"))) << tool;
  }
  EXPECT_TRUE(std::filesystem::exists(schema_dir / "common.schema.json"));
}

TEST(Schemas, AreJsonWithResolvingRefsAndKnownKeywords) {
  const auto files = schema_files();
  ASSERT_GE(files.size(), tools.size() + 1);
  for (const auto& file : files) {
    SCOPED_TRACE(file.string());
    ASSERT_NO_THROW(read(file));
    const auto validator = Validator::from_file(file);
    const auto problems = validator.schema_problems();
    EXPECT_TRUE(problems.empty()) << joined(problems);
  }
}

TEST(Schemas, EveryPropertyIsDescribed) {
  for (const auto& file : schema_files()) {
    std::vector<std::string> undescribed;
    collect_undescribed(read(file), "", undescribed);
    EXPECT_TRUE(undescribed.empty()) << file.filename().string() << ":\n" << joined(undescribed);
  }
}

TEST(Schemas, ToolReportsAreClosed) {
  for (const auto& tool : tools) {
    const auto schema = read(schema_dir / (tool + ".schema.json"));
    EXPECT_EQ(schema.value("additionalProperties", json(true)), json(false)) << tool;
    EXPECT_EQ(schema.at("properties").at("tool").at("const"), tool);
  }
}

// The checked-in samples are what the sample tests validate; here each also proves the
// schema is not so loose that anything passes.
json first_sample(const std::string& tool) {
  for (const auto& entry : std::filesystem::directory_iterator(samples_dir)) {
    const auto name = entry.path().filename().string();
    if (name.starts_with(tool + "-") && name.ends_with(".json")) return read(entry.path());
  }
  return nullptr;
}

TEST(Schemas, RejectWhatTheToolsNeverWrite) {
  for (const auto& tool : tools) {
    SCOPED_TRACE(tool);
    const auto validator = Validator::from_file(schema_dir / (tool + ".schema.json"));
    auto sample = first_sample(tool);
    ASSERT_TRUE(sample.is_object()) << "no sample for " << tool;
    ASSERT_TRUE(validator.validate(sample).empty()) << joined(validator.validate(sample));

    auto extra = sample;
    extra["surprise"] = 1;
    EXPECT_TRUE(reports(validator.validate(extra), "/surprise", "undocumented property"));

    auto missing = sample;
    missing.erase("duration_s");
    EXPECT_TRUE(reports(validator.validate(missing), "(root)", "missing required property \"duration_s\""));

    auto other_tool = sample;
    other_tool["tool"] = tool == "rping" ? "udaddy" : "rping";
    EXPECT_FALSE(validator.validate(other_tool).empty());

    auto bad_error = sample;
    bad_error["errors"] = {{{"message", "x"}, {"errno", 19}}};  // errno without its name
    EXPECT_FALSE(validator.validate(bad_error).empty());

    auto failed_with_exit_0 = sample;
    failed_with_exit_0["outcome"] = "failed";
    failed_with_exit_0["exit_code"] = 0;
    failed_with_exit_0["errors"] = {{{"message", "x"}}};
    EXPECT_FALSE(validator.validate(failed_with_exit_0).empty());
  }
}

// Shapes no sample here shows (they need a device), as the code writes them: the schemas
// must accept them. Each starts from a real sample and changes what such a run changes.
std::vector<std::string> check_shape(const std::string& tool, const json& changes) {
  auto document = first_sample(tool);
  document.update(changes);
  return Validator::from_file(schema_dir / (tool + ".schema.json")).validate(document);
}

TEST(Schemas, AcceptGroupReports) {
  // lib/rdma/connection_group.cpp fill(): a ucmatose server that ran to the end.
  const auto ucmatose = R"j({
    "role": "server", "outcome": "completed", "exit_code": 0, "errors": [],
    "local_address": "10.55.0.1:7471", "peer_address": "",
    "cm_timings_ms": {"create_qp": 0.4, "accept": 1.2, "transfer": 0.3, "disconnect": 0.8},
    "iterations": {"requested": 20, "completed": 20}, "bytes": 4000,
    "steps": [{"step": "create_qp", "connections": 2, "wall_ms": 0.4, "max_ms": 0.2, "min_ms": 0.1,
               "avg_ms": 0.15, "per_connection_us": 200.0, "failed": 0}],
    "connections": [{"index": 0, "state": "disconnected", "steps_ms": {"create_qp": 0.2, "accept": 0.6},
                     "sends_completed": 10, "received": 10, "receives_expected": 10, "lost": 0,
                     "local_address": "10.55.0.1:7471", "peer_address": "10.55.0.2:40000", "qp_num": 17}],
    "events": [{"event": "DISCONNECTED", "status": 0, "connection": null}],
    "connections_requested": 2, "connections_ready": 2, "connections_failed": 0,
    "setup": {"wall_ms": 2.0, "per_connection_ms": 1.0, "connections_per_s": 1000.0},
    "messages": {"size": 100, "sent": 20, "received": 20, "expected": 20, "lost": 0},
    "migrate_ms": 0.05})j"_json;
  EXPECT_TRUE(check_shape("ucmatose", ucmatose).empty()) << joined(check_shape("ucmatose", ucmatose));

  // A udaddy server that rejected a request beyond -c and timed out waiting for datagrams.
  const auto udaddy = R"j({
    "role": "server", "outcome": "timed_out", "exit_code": 1,
    "errors": [{"message": "timed out waiting for datagrams from the client(s) (1 connection(s) short, ..."}],
    "arguments": {"server": "", "bind": "", "port": "7174", "count": 10, "size": 100, "connections": 1,
                  "format": "name", "port_space": "udp"},
    "steps": [], "connections": [{"index": 0, "state": "established", "steps_ms": {"accept": 0.5},
                                  "sends_completed": 0, "received": 4, "receives_expected": 10, "lost": 6,
                                  "unfinished_step": "receive", "remote_qpn": 33}],
    "events": [{"event": "CONNECT_REQUEST", "status": 0, "rejected": "beyond -c"}],
    "connections_requested": 1, "connections_ready": 1, "connections_failed": 0,
    "messages": {"size": 100, "sent": 0, "received": 4, "expected": 10, "lost": 6}})j"_json;
  EXPECT_TRUE(check_shape("udaddy", udaddy).empty()) << joined(check_shape("udaddy", udaddy));

  // An mckey receiver interrupted by SIGTERM, with join latencies and a multicast error.
  const auto mckey = R"j({
    "role": "receiver", "outcome": "interrupted", "exit_code": 143,
    "errors": [{"message": "interrupted while waiting for datagrams from the group 239.1.1.1"}],
    "steps": [], "connections": [], "connections_requested": 1, "connections_ready": 1, "connections_failed": 0,
    "events": [{"event": "MULTICAST_ERROR", "status": -110, "connection": 0}],
    "messages": {"size": 100, "sent": 0, "received": 0, "expected": 10, "lost": 10},
    "join_latency_us": {"count": 1, "min": 900.0, "avg": 900.0, "stdev": 0.0, "p50": 900.0, "p99": 900.0,
                        "p99.9": 900.0, "max": 900.0}})j"_json;
  EXPECT_TRUE(check_shape("mckey", mckey).empty()) << joined(check_shape("mckey", mckey));

  // A ucmatose client one of whose connections the server rejected: the others went on.
  const auto partial = R"j({
    "role": "client", "outcome": "failed", "exit_code": 1,
    "errors": [{"message": "1 of 2 connection(s) failed, the others went on; connection 1: rdma_connect(...)",
                "call": "rdma_connect", "errno": 111, "errno_name": "ECONNREFUSED"}],
    "steps": [{"step": "connect", "connections": 2, "wall_ms": 0.4, "max_ms": 0.3, "min_ms": 0.1,
               "avg_ms": 0.2, "per_connection_us": 200.0, "failed": 1}],
    "connections": [{"index": 1, "state": "failed", "steps_ms": {"connect": 0.3}, "sends_completed": 0,
                     "received": 0, "receives_expected": 0, "lost": 0, "failed_step": "connect",
                     "failure": {"message": "rdma_connect(10.55.0.1:7471): Connection refused",
                                 "call": "rdma_connect", "errno": 111, "errno_name": "ECONNREFUSED"}}],
    "events": [], "connections_requested": 2, "connections_ready": 1, "connections_failed": 1,
    "messages": {"size": 100, "sent": 10, "received": 10, "expected": 10, "lost": 0}})j"_json;
  EXPECT_TRUE(check_shape("ucmatose", partial).empty()) << joined(check_shape("ucmatose", partial));

  // Once the group exists its results are always there.
  auto without_messages = ucmatose;
  without_messages.erase("messages");
  EXPECT_FALSE(check_shape("ucmatose", without_messages).empty());
}

TEST(Schemas, AcceptRpingPersistentServers) {
  const auto interrupted = R"j({
    "role": "server", "outcome": "interrupted", "exit_code": 130, "errors": [],
    "connections": [{"peer": "10.55.0.2:40000", "iterations": 5, "bytes": 640, "outcome": "completed", "error": ""},
                    {"peer": "10.55.0.2:40001", "iterations": 2, "bytes": 256, "outcome": "failed",
                     "error": "peer sent a 7-byte message; rping messages are 16 bytes"}]})j"_json;
  EXPECT_TRUE(check_shape("rping", interrupted).empty()) << joined(check_shape("rping", interrupted));
  // Idle for --accept-timeout: a normal end, never a timed-out one with exit 0.
  auto idle = interrupted;
  idle["outcome"] = "completed";
  idle["exit_code"] = 0;
  EXPECT_TRUE(check_shape("rping", idle).empty()) << joined(check_shape("rping", idle));
  idle["outcome"] = "timed_out";
  EXPECT_FALSE(check_shape("rping", idle).empty());
}

TEST(Schemas, AcceptPersistentRdmaServerAndSendBwServer) {
  const auto rdma_server = R"j({
    "role": "server", "outcome": "completed", "exit_code": 0, "errors": [],
    "arguments": {"server": "10.55.0.1", "port": "7471", "persistent": true},
    "connections": [{"peer": "10.55.0.1:40000", "iterations": 10, "bytes": 320, "outcome": "completed", "error": ""},
                    {"peer": "", "iterations": 0, "bytes": 0, "outcome": "failed", "error": "rdma_get_request: ..."}]
  })j"_json;
  EXPECT_TRUE(check_shape("rdma_server", rdma_server).empty()) << joined(check_shape("rdma_server", rdma_server));

  auto send_bw = read(samples_dir / "send_bw-server-no-device.json");
  send_bw.update(R"j({
    "role": "server", "outcome": "interrupted", "exit_code": 130, "errors": [],
    "connections": [{"peer": "10.55.0.1:40000", "iterations": 1100, "bytes": 4505600, "outcome": "completed",
                     "error": "", "test": {"test": "bw", "operation": "send", "queue_pairs": 1,
                     "bidirectional": false, "client_depth": 128, "max_size": 4096,
                     "path": {"device": "rxe0", "port": 1, "path_mtu": 1024}}},
                    {"peer": "10.55.0.1:40001", "iterations": 0, "bytes": 0, "outcome": "failed",
                     "error": "rdma_accept: ...", "test": {}}]
  })j"_json);
  send_bw.erase("test");
  send_bw.erase("rows");
  send_bw["arguments"]["persistent"] = true;
  const auto validator = Validator::from_file(schema_dir / "send_bw.schema.json");
  EXPECT_TRUE(validator.validate(send_bw).empty()) << joined(validator.validate(send_bw));
  // Without -P a server reports its test and rows, not connections.
  send_bw["arguments"]["persistent"] = false;
  EXPECT_FALSE(validator.validate(send_bw).empty());
  // A client record says what it ran.
  send_bw["arguments"]["persistent"] = true;
  send_bw["connections"][0].erase("test");
  EXPECT_FALSE(validator.validate(send_bw).empty());
}

TEST(Schemas, AcceptSendBwServers) {
  const auto path = R"j({"device": "rxe0", "port": 1, "path_mtu": 1024})j"_json;
  auto bandwidth = R"j({
    "role": "server", "outcome": "completed", "exit_code": 0, "errors": [],
    "test": {"test": "bw", "operation": "write", "queue_pairs": 2, "bidirectional": false, "client_depth": 128,
             "max_size": 65536},
    "rows": [{"bytes": 65536, "iterations": 2000, "seconds": 1.5, "bw_peak_mib_per_s": 90.0,
              "bw_average_mib_per_s": 85.0, "bw_average_gbit_per_s": 0.7, "message_rate_mpps": 0.001}],
    "refused": [{"peer": "10.55.0.2:41000", "reason": "131072-byte messages asked for; this server allows ..."}]
  })j"_json;
  bandwidth["test"]["path"] = path;
  EXPECT_TRUE(check_shape("send_bw", bandwidth).empty()) << joined(check_shape("send_bw", bandwidth));

  auto latency = R"j({
    "role": "server", "outcome": "completed", "exit_code": 0, "errors": [], "rows": [], "answered": 1100,
    "test": {"test": "lat", "operation": "send", "queue_pairs": 1, "bidirectional": false, "client_depth": 1,
             "max_size": 2}})j"_json;
  latency["test"]["path"] = path;
  EXPECT_TRUE(check_shape("send_bw", latency).empty()) << joined(check_shape("send_bw", latency));

  auto partial_gid = latency;
  partial_gid["test"]["path"]["gid_index"] = 1;  // without gid and gid_type
  EXPECT_FALSE(check_shape("send_bw", partial_gid).empty());
}

TEST(Schemas, AcceptRdmaClientRuns) {
  const auto completed = R"j({
    "outcome": "completed", "exit_code": 0, "errors": [], "inline_send": true,
    "local_address": "10.55.0.1:50000", "peer_address": "10.55.0.1:7471",
    "cm_timings_ms": {"getaddrinfo": 0.1, "create_ep": 2.0, "reg_msgs": 0.1, "connect": 1.0, "exchanges": 0.5,
                      "disconnect": 0.2},
    "iterations": {"requested": 1, "completed": 1}, "bytes": 32,
    "rtt_us": {"count": 1, "min": 40.0, "avg": 40.0, "stdev": 0.0, "p50": 40.0, "p99": 40.0, "p99.9": 40.0,
               "max": 40.0}})j"_json;
  EXPECT_TRUE(check_shape("rdma_client", completed).empty()) << joined(check_shape("rdma_client", completed));
  auto with_errors = completed;
  with_errors["errors"] = {{{"message", "x"}}};  // a completed run has none
  EXPECT_FALSE(check_shape("rdma_client", with_errors).empty());
}

}  // namespace
