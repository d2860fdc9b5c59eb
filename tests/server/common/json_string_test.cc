#include "server/common/json_string.h"

#include <string>

#include "gtest/gtest.h"

namespace sluice {
namespace {

std::string Json(absl::string_view text) {
  std::string out = "x=";
  AppendJsonString(text, &out);
  return out;
}

// Verifies the text is appended quoted, with quotes, backslashes, newlines, other control
// bytes and DEL escaped, and everything else (UTF-8 included) as it is.
TEST(JsonStringTest, EscapesWhatJsonAndYamlNeed) {
  EXPECT_EQ(Json(""), "x=\"\"");
  EXPECT_EQ(Json("say \"hi\"\\ now"), "x=\"say \\\"hi\\\"\\\\ now\"");
  EXPECT_EQ(Json("a\nb\tc\x01"), "x=\"a\\nb\\u0009c\\u0001\"");
  EXPECT_EQ(Json("del\x7f"), "x=\"del\\u007f\"");
  EXPECT_EQ(Json("caf\xc3\xa9 $1 ^a\\.(.*)$"), "x=\"caf\xc3\xa9 $1 ^a\\\\.(.*)$\"");
}

}  // namespace
}  // namespace sluice
