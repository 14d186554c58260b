// The diagnosers' cause tables (lib/diag/causes.hpp) against what users and scripts read:
// the man pages' CAUSES sections and the report schemas' enums.

#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/diag/causes.hpp"
#include "lib/diag/diagnosis.hpp"
#include "tests/unit/source_docs.hpp"

namespace {

using rdmakit::diag::bind_causes;
using rdmakit::diag::BindCause;
using rdmakit::diag::connect_causes;
using rdmakit::diag::connect_host_causes;
using rdmakit::diag::ConnectCause;
using rdmakit::testing::report_schema;

struct ManCauses {
  std::vector<std::string> all;        // every name of every .SS line, in order
  std::vector<std::string> from_bind;  // those of the line marked "(from diag-bind)"
};

// The cause names of PAGE's CAUSES section: each ".SS" line names one or more, separated by
// ", ", and may end in a parenthesis ("(exit 0)", "(InfiniBand)", "(from diag-bind)").
ManCauses man_causes(const std::string& page) {
  std::istringstream in(rdmakit::testing::man_page(page));
  EXPECT_FALSE(in.str().empty()) << page;
  ManCauses causes;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(".SH ")) inside = line == ".SH CAUSES";
    if (!inside || !line.starts_with(".SS ")) continue;
    std::string names = line.substr(4);
    const bool from_bind = names.ends_with("(from diag-bind)");
    if (const auto paren = names.find(" ("); paren != std::string::npos) names.resize(paren);
    for (std::size_t start = 0; start <= names.size();) {
      const auto comma = names.find(", ", start);
      const auto name = names.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      causes.all.push_back(name);
      if (from_bind) causes.from_bind.push_back(name);
      if (comma == std::string::npos) break;
      start = comma + 2;
    }
  }
  return causes;
}

template <typename Table>
std::vector<std::string> table_names(const Table& table) {
  return {table.begin(), table.end()};
}

std::set<std::string> name_set(const std::vector<std::string>& names) {
  return {names.begin(), names.end()};
}

TEST(Causes, DiagBindManPageListsItsTableInOrder) {
  EXPECT_EQ(man_causes("diag-bind.1").all, table_names(bind_causes));
}

TEST(Causes, DiagConnectManPageListsItsTable) {
  const auto man = man_causes("diag-connect.1");
  EXPECT_EQ(name_set(man.all), name_set(table_names(connect_causes)));
  // What diag-connect takes from diag-bind is what it says it takes (the InfiniBand causes,
  // which diag-connect also finds from both hosts' views, have an entry of their own).
  for (const auto& name : man.from_bind) {
    EXPECT_TRUE(rdmakit::diag::listed_in<connect_host_causes>(name)) << name << " is marked (from diag-bind)";
  }
}

TEST(Causes, DiagBindSchemaOutcomesAreItsCausesAndItsModes) {
  const auto outcomes = report_schema("diag-bind")["properties"]["outcome"]["enum"].get<std::vector<std::string>>();
  std::vector<std::string> causes;
  std::set<std::string> others;
  for (const auto& outcome : outcomes) {
    if (rdmakit::diag::listed_in<bind_causes>(outcome)) {
      causes.push_back(outcome);
    } else {
      others.insert(outcome);
    }
  }
  EXPECT_EQ(causes, table_names(bind_causes));
  // --gids' and the runner's outcomes, none of them a cause.
  EXPECT_EQ(others, (std::set<std::string>{"no_gid", "unsupported", "usage_error", "failed"}));
}

TEST(Causes, DiagConnectSchemaCauseIsItsTable) {
  const auto document = report_schema("diag-connect");
  EXPECT_EQ(document["$defs"]["cause"]["enum"].get<std::vector<std::string>>(), table_names(connect_causes));
  auto outcomes = table_names(connect_causes);
  for (const char* other : {"completed", "usage_error", "failed", "interrupted"}) outcomes.emplace_back(other);
  EXPECT_EQ(document["properties"]["outcome"]["enum"].get<std::vector<std::string>>(), outcomes);
}

TEST(Causes, InventoryCheckStatusesAreTheSchemas) {
  const auto common = report_schema("common");
  std::vector<std::string> names;
  for (const auto status : {rdmakit::diag::CheckStatus::ok, rdmakit::diag::CheckStatus::warn,
                            rdmakit::diag::CheckStatus::fail, rdmakit::diag::CheckStatus::info}) {
    names.emplace_back(rdmakit::diag::to_string(status));
  }
  EXPECT_EQ(common["$defs"]["check"]["properties"]["status"]["enum"].get<std::vector<std::string>>(), names);
}

TEST(Causes, NamedFindsOnlyTheTablesEntries) {
  ASSERT_TRUE(ConnectCause::named("no_listener"));
  EXPECT_EQ(ConnectCause::named("no_listener")->name(), "no_listener");
  EXPECT_FALSE(ConnectCause::named("no_listner"));
  EXPECT_FALSE(ConnectCause::named("memlock_too_low")) << "diag-bind's alone";
  EXPECT_TRUE(BindCause::named("memlock_too_low"));
  constexpr BindCause literal = "no_route";
  EXPECT_EQ(literal.name(), "no_route");
}

}  // namespace
