// lib/base/json_stream: the values at the streamed paths handed over one at a time, the rest
// kept whole, the skipped keys dropped, and bytes that are not one JSON document refused.

#include "lib/base/json_stream.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "lib/base/error.hpp"

namespace rdmakit {
namespace {

struct Streamed {
  std::vector<std::pair<std::string, nlohmann::json>> values;  // "a/b/0" and the value
  nlohmann::json kept;
};

Streamed stream(const std::string& text, const JsonStreamPlan& plan) {
  std::istringstream in(text);
  Streamed out;
  out.kept = read_json_stream(in, plan, [&out](const std::vector<std::string>& path, nlohmann::json& value) {
    std::string joined;
    for (const auto& segment : path) joined += (joined.empty() ? "" : "/") + segment;
    out.values.emplace_back(joined, std::move(value));
  });
  return out;
}

TEST(JsonStream, HandsOverTheStreamedValuesAndKeepsTheRest) {
  const auto read = stream(R"({"head":{"n":2},"pairs":[{"a":1},{"a":[2,3]},4],"matrices":{"bw":{"unit":"x",)"
                           R"("first":[[1,null],[2]]}},"summary":{"big":[1,2,3]},"tail":"t"})",
                           {.streamed = {"pairs/*", "matrices/*/first/*"}, .skipped = {"summary"}});
  ASSERT_EQ(read.values.size(), 5U);
  EXPECT_EQ(read.values[0].first, "pairs/0");
  EXPECT_EQ(read.values[0].second, nlohmann::json::parse(R"({"a":1})"));
  EXPECT_EQ(read.values[1].second, nlohmann::json::parse(R"({"a":[2,3]})"));
  EXPECT_EQ(read.values[2].first, "pairs/2");
  EXPECT_EQ(read.values[2].second, 4);
  EXPECT_EQ(read.values[3].first, "matrices/bw/first/0");
  EXPECT_EQ(read.values[4].second, nlohmann::json::parse("[2]"));
  EXPECT_EQ(read.kept, nlohmann::json::parse(R"({"head":{"n":2},"pairs":[],"matrices":{"bw":{"unit":"x","first":[]}},)"
                                             R"("tail":"t"})"));
}

TEST(JsonStream, KeepsADocumentWithNothingStreamed) {
  for (const auto* text : {R"([1,{"a":[]},"x"])", "7", R"("text")", "null", R"({"pairs":5})"}) {
    const auto read = stream(text, {.streamed = {"pairs/*"}, .skipped = {}});
    EXPECT_TRUE(read.values.empty()) << text;
    EXPECT_EQ(read.kept, nlohmann::json::parse(text)) << text;
  }
}

TEST(JsonStream, RefusesWhatIsNotOneDocument) {
  const auto refusal = [](const std::string& text, std::size_t depth = 64) {
    try {
      stream(text, {.streamed = {"pairs/*"}, .skipped = {}, .max_depth = depth});
    } catch (const ProtocolError& error) {
      return std::string(error.what());
    }
    return std::string("(read)");
  };
  EXPECT_EQ(refusal(R"({"pairs":[{"a":1},{"a")").rfind("not a complete JSON document at byte 23: ", 0), 0U)
      << refusal(R"({"pairs":[{"a":1},{"a")");
  EXPECT_NE(refusal("").find("not a complete JSON document at byte"), std::string::npos);
  EXPECT_NE(refusal("{} {}").find("not a complete JSON document"), std::string::npos);
  EXPECT_EQ(refusal(std::string(100000, '[')), "JSON nested deeper than 64 levels");
  EXPECT_EQ(refusal(R"({"pairs":[[[[1]]]]})", 4), "JSON nested deeper than 4 levels");
  EXPECT_EQ(refusal(R"({"pairs":[[[1]]]})", 4), "(read)");
}

}  // namespace
}  // namespace rdmakit
