// The one table of a run's outcome names (lib/base/report.hpp) against what scripts read: the
// report schemas' enums and rdmakit(7)'s list.

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/base/report.hpp"
#include "tests/unit/source_docs.hpp"

namespace {

using rdmakit::Outcome;
using rdmakit::outcome_names;
using rdmakit::testing::report_schema;

std::set<std::string> table() {
  return {outcome_names.begin(), outcome_names.end()};
}

// Every name an "outcome" property of SCHEMA allows: its enum or const, at any depth.
void collect_outcomes(const nlohmann::json& schema, std::set<std::string>& names) {
  if (schema.is_array()) {
    for (const auto& item : schema) collect_outcomes(item, names);
    return;
  }
  if (!schema.is_object()) return;
  for (const auto& [key, value] : schema.items()) {
    if (key == "outcome" && value.is_object()) {
      if (value.contains("const")) names.insert(value["const"].get<std::string>());
      if (value.contains("enum")) {
        for (const auto& name : value["enum"]) names.insert(name.get<std::string>());
      }
    }
    collect_outcomes(value, names);
  }
}

TEST(Outcome, NamesRoundTrip) {
  for (const auto name : outcome_names) {
    const auto outcome = rdmakit::outcome_named(name);
    ASSERT_TRUE(outcome.has_value()) << name;
    EXPECT_EQ(rdmakit::to_string(*outcome), name);
  }
  EXPECT_EQ(rdmakit::to_string(Outcome::peer_disconnected), "peer_disconnected");
  EXPECT_FALSE(rdmakit::outcome_named("complete").has_value());
  EXPECT_FALSE(rdmakit::outcome_named("").has_value());
}

// The common run outcome every tool's report refers to allows the table, no more, no less.
TEST(Outcome, CommonSchemaIsTheTable) {
  std::set<std::string> names;
  collect_outcomes(report_schema("common")["$defs"]["run_outcome"], names);
  EXPECT_EQ(names, table());
}

// Each tool narrows the table to what it can end with; none adds a name of its own (the
// diagnosers' causes and rdma_smoke's case results are other tables: tests/unit/causes_test).
TEST(Outcome, ToolSchemasNameOnlyTheTable) {
  for (const char* tool : {"rping", "rdma_server", "rdma_client", "udaddy", "mckey", "ucmatose", "send_bw", "rdma_mesh",
                           "rdma_pingmesh", "rdma_smoke"}) {
    const auto schema = report_schema(tool);
    std::set<std::string> names;
    collect_outcomes(schema["properties"], names);
    collect_outcomes(schema.value("allOf", nlohmann::json::array()), names);
    for (const auto& name : names) EXPECT_TRUE(table().contains(name)) << tool << ": outcome " << name;
    EXPECT_TRUE(names.contains("completed")) << tool;
    EXPECT_TRUE(names.contains("usage_error")) << tool;
  }
  std::set<std::string> served;
  collect_outcomes(report_schema("common")["$defs"]["served_connection"], served);
  for (const auto& name : served) EXPECT_TRUE(table().contains(name)) << "served_connection: outcome " << name;
}

TEST(Outcome, RdmakitManPageListsTheTableInOrder) {
  std::string list;
  for (std::size_t index = 0; index < outcome_names.size(); ++index) {
    list += index == 0 ? "" : index + 1 == outcome_names.size() ? " or " : ", ";
    list += outcome_names[index];
  }
  EXPECT_NE(rdmakit::testing::man_page("rdmakit.7").find("\n" + list + ",\n"), std::string::npos)
      << "rdmakit.7 does not list: " << list;
}

}  // namespace
