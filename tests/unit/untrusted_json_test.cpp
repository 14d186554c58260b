// JSON a peer sent (lib/base/untrusted_json): nesting counted outside strings, refused past
// the reader's depth before parsing, and nlohmann's error words kept.

#include <gtest/gtest.h>

#include <string>

#include "lib/base/error.hpp"
#include "lib/base/untrusted_json.hpp"

namespace rdmakit {
namespace {

TEST(UntrustedJson, CountsNestingOutsideStrings) {
  EXPECT_EQ(json_nesting_depth("1"), 0U);
  EXPECT_EQ(json_nesting_depth(R"({"a":[1,{"b":[]}]})"), 4U);
  EXPECT_EQ(json_nesting_depth(R"({"a":"[[[[{{{\"[[["})"), 1U);
  EXPECT_EQ(json_nesting_depth("]]]][[]"), 2U);
}

TEST(UntrustedJson, RefusesDeeperThanAllowedBeforeParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  try {
    (void)parse_untrusted_json(deep, 32, "the peer's message");
    FAIL() << "100000 levels parsed";
  } catch (const ProtocolError& refused) {
    EXPECT_STREQ(refused.what(), "the peer's message nests deeper than 32 levels");
  }
  EXPECT_EQ(parse_untrusted_json(R"([[["x"]]])", 3, "x"), nlohmann::json::parse(R"([[["x"]]])"));
  EXPECT_THROW((void)parse_untrusted_json(R"([[["x"]]])", 2, "x"), ProtocolError);
}

TEST(UntrustedJson, SaysWhyWhatIsNotJson) {
  try {
    (void)parse_untrusted_json(R"({"a":)", 8, "the agent's answer");
    FAIL() << "half an object parsed";
  } catch (const ProtocolError& refused) {
    const std::string text = refused.what();
    EXPECT_EQ(text.rfind("the agent's answer is not JSON: parse error", 0), 0U) << text;
  }
}

}  // namespace
}  // namespace rdmakit
