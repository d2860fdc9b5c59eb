#include "server/service/json_request_check.h"

#include <string>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

constexpr size_t kMaxElements = 64;  // the larger of the default max_descriptors and max_entries

// Every field of a RateLimitRequest and its descriptors, as proto3 JSON spells them in snake_case
// and in lowerCamelCase, with uint64 as a string and an enum by name or number.
constexpr char kEveryFieldSnake[] = R"({
  "domain": "envoy",
  "descriptors": [
    {
      "entries": [{"key": "remote_address", "value": "10.0.0.1"}, {"key": "path", "value": "/"}],
      "limit": {"requests_per_unit": 10, "unit": "MINUTE"},
      "hits_addend": "18446744073709551615"
    },
    {"entries": [{"key": "user", "value": "bob"}], "limit": {"unit": 3}, "hits_addend": 7}
  ],
  "hits_addend": 2
})";
constexpr char kEveryFieldCamel[] =
    R"({"domain":"envoy","descriptors":[{"entries":[{"key":"k","value":"v"}],)"
    R"("limit":{"requestsPerUnit":10,"unit":"SECOND"},"hitsAddend":"5"}],"hitsAddend":"3"})";

// Bodies that are RateLimitRequests: the check accepts them and so does protobuf.
const std::vector<std::string>& ValidRequests() {
  static const auto* bodies = new std::vector<std::string>{
      "{}",
      " \t\r\n{ \t\r\n} \t\r\n",
      kEveryFieldSnake,
      kEveryFieldCamel,
      // The same key in different objects is no duplicate.
      R"({"hits_addend":1,"descriptors":[{"hits_addend":2,"entries":[{"key":"a","value":"b"},)"
      R"({"key":"c","value":"d"}]}]})",
      // Escapes, \u escapes (a surrogate pair among them) and raw UTF-8.
      R"({"domain":"\"\\\/\b\f\n\r\t\u00e9\u20AC\ud83d\ude00 é € 😀"})",
      // A key spelled with an escape is the same key to protobuf.
      R"({"dom\u0061in":"x"})",
      // Numbers as the grammar writes them; integral ones protobuf takes for uint32.
      R"({"hits_addend":0})",
      R"({"hits_addend":1e3})",
      R"({"hits_addend":1E+3})",
      R"({"hits_addend":10.0e-1})",
      R"({"hits_addend":"4294967295"})",
      R"({"descriptors":[{"hits_addend":12345678901234567890}]})",
      // null for a message, a repeated field and a scalar.
      R"({"domain":null,"descriptors":null,"hits_addend":null})",
      R"({"descriptors":[{"limit":null,"entries":[]}]})",
      R"({"descriptors":[]})",
  };
  return *bodies;
}

// Verifies real RateLimitRequests (every field, both spellings, escapes, numbers as strings) pass
// the check, and that protobuf parses each: the table is of real requests.
TEST(JsonRequestCheckTest, AcceptsRateLimitRequests) {
  for (const std::string& body : ValidRequests()) {
    SCOPED_TRACE(body);
    EXPECT_TRUE(CheckRateLimitRequestJson(body, kMaxElements).ok())
        << CheckRateLimitRequestJson(body, kMaxElements);
    envoy::service::ratelimit::v3::RateLimitRequest request;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(body, &request).ok());
  }
}

// Verifies the parsed fields of both spellings: the check lets both through unchanged.
TEST(JsonRequestCheckTest, BothSpellingsCarryEveryField) {
  envoy::service::ratelimit::v3::RateLimitRequest snake;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(kEveryFieldSnake, &snake).ok());
  EXPECT_EQ(snake.hits_addend(), 2u);
  EXPECT_EQ(snake.descriptors(0).limit().requests_per_unit(), 10u);
  EXPECT_EQ(snake.descriptors(0).hits_addend().value(), 18446744073709551615ull);
  EXPECT_EQ(snake.descriptors(1).hits_addend().value(), 7u);
  envoy::service::ratelimit::v3::RateLimitRequest camel;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(kEveryFieldCamel, &camel).ok());
  EXPECT_EQ(camel.hits_addend(), 3u);
  EXPECT_EQ(camel.descriptors(0).limit().requests_per_unit(), 10u);
  EXPECT_EQ(camel.descriptors(0).hits_addend().value(), 5u);
}

// Verifies JSON at the budget's edges passes: 16 levels, an array of exactly the bound, an object
// of 16 keys, every literal (field names are protobuf's to refuse, not the check's).
TEST(JsonRequestCheckTest, AcceptsJsonAtTheBudgetsEdges) {
  std::string deep;
  for (int i = 1; i < kMaxJsonRequestDepth; ++i) {
    deep += i % 2 == 1 ? "{\"a\":" : "[";
  }
  deep += "{}";
  for (int i = kMaxJsonRequestDepth - 1; i >= 1; --i) {
    deep += i % 2 == 1 ? "}" : "]";
  }
  std::string three = R"({"descriptors":[{},{},{}]})";
  std::string sixteen_keys = "{";
  for (int i = 0; i < 16; ++i) {
    sixteen_keys += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + (i < 15 ? "," : "}");
  }
  const std::vector<std::pair<std::string, size_t>> cases = {
      {deep, kMaxElements},
      {three, 3},
      {sixteen_keys, kMaxElements},
      {R"({"a":true,"b":false,"c":null,"d":-0,"e":-1.5E-7,"f":[1,"x",{},true]})", kMaxElements},
      // Keys that differ in case, or whose JSON names do ("a_b" is "aB"), are different fields.
      {R"({"domain":1,"Domain":2,"ab":3,"a_b":4})", kMaxElements},
  };
  for (const auto& [body, max] : cases) {
    SCOPED_TRACE(body);
    EXPECT_TRUE(CheckRateLimitRequestJson(body, max).ok()) << CheckRateLimitRequestJson(body, max);
  }
}

struct Refusal {
  std::string body;
  std::string message;
  size_t max_elements = kMaxElements;
};

// Verifies each kind of fault is refused as kInvalidArgument, with a message that says what and at
// which byte.
TEST(JsonRequestCheckTest, RefusesWithWhatAndWhere) {
  const std::vector<Refusal> cases = {
      // The shape of the body.
      {"", "an empty body at byte 0: a RateLimitRequest is a JSON object"},
      {" \n ", "an empty body at byte 3: a RateLimitRequest is a JSON object"},
      {"[]",
       "unexpected '[' at byte 0: expected '{': a RateLimitRequest is a "
       "JSON object"},
      {"\"x\"",
       "unexpected '\"' at byte 0: expected '{': a RateLimitRequest "
       "is a JSON object"},
      {"\xEF\xBB\xBF{}",
       "unexpected byte 0xEF at byte 0: expected '{': a "
       "RateLimitRequest is a JSON object"},
      {R"({"domain":"a"} x)",
       "unexpected 'x' at byte 15: expected nothing "
       "after the request's object"},
      {"{}{}", "unexpected '{' at byte 2: expected nothing after the request's object"},
      {"{", "the body ends at byte 1: expected a key in double quotes"},
      {R"({"domain":"a")", "the body ends at byte 13: expected ',' or '}'"},
      {R"({"descriptors":[{})", "the body ends at byte 18: expected ',' or ']'"},
      {R"({"domain":})", "unexpected '}' at byte 10: expected a value"},
      // Finding 6: arrays in arrays, which protobuf flattens.
      {R"({"domain":"a","descriptors":[[{"entries":[{"key":"k","value":"v"}]}]]})",
       "an array inside an array at byte 29: RateLimitRequest JSON has no such "
       "field"},
      {R"({"a":[1,[]]})",
       "an array inside an array at byte 8: "
       "RateLimitRequest JSON has no such field"},
      // Finding 6: duplicate keys, of which protobuf keeps the last.
      {R"({"domain":"a","domain":"b"})", R"(duplicate key "domain" at byte 14 (first at byte 1))"},
      {R"({"hits_addend":1,"hitsAddend":2})",
       R"(duplicate key "hitsAddend" at byte 17 (the same field as "hits_addend" at byte 1))"},
      {R"({"domain":"a","dom\u0061in":"b"})",
       R"(duplicate key "dom\u0061in" at byte 14 (the same field as "domain" at byte 1))"},
      {R"({"descriptors":[{"entries":[],"limit":{"requestsPerUnit":1,"requests_per_unit":2}}]})",
       "duplicate key \"requests_per_unit\" at byte 59 (the same field as "
       "\"requestsPerUnit\" at "
       "byte 39)"},
      // ToJsonName upper-cases nothing but letters: "a_1" is "a1".
      {R"({"a_1":3,"a1":4})",
       R"(duplicate key "a1" at byte 9 (the same field as "a_1" at byte 1))"},
      {R"({"descriptors":[{"entries":[{"key":"k"}],"limit":{},"entries":[]}]})",
       R"(duplicate key "entries" at byte 52 (first at byte 17))"},
      // Budgets.
      {R"({"descriptors":[{},{},{},{}]})",
       "an array of more than 3 elements at byte 15: at most 3, the most "
       "descriptors or entries "
       "a request may have",
       3},
      {R"({"a":[1]})",
       "an array of more than 0 elements at byte 5: at most 0, the most "
       "descriptors or entries "
       "a request may have",
       0},
      {R"({"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"ka":10,)"
       R"("kb":11,"kc":12,"kd":13,"ke":14,"kf":15,"kg":16})",
       "an object of more than 16 keys at byte 0: no RateLimitRequest object "
       "has more than 3 "
       "fields"},
      // Syntax protobuf's parser lets through.
      {"{'domain':'a'}", "unexpected ''' at byte 1: expected a key in double quotes"},
      {"{domain:\"a\"}", "unexpected 'd' at byte 1: expected a key in double quotes"},
      {R"({"domain":"a",})", "unexpected '}' at byte 14: expected a key in double quotes"},
      {R"({"descriptors":[{},]})", "unexpected ']' at byte 19: expected a value"},
      {R"({"domain" "a"})", "unexpected '\"' at byte 10: expected ':' after a key"},
      {R"({"domain":"a" "hits_addend":1})", "unexpected '\"' at byte 14: expected ',' or '}'"},
      {R"({"descriptors":[{} {}]})", "unexpected '{' at byte 19: expected ',' or ']'"},
      // Strings.
      {"{\"domain\":\"a\nb\"}",
       "a raw control character 0x0A in a string at "
       "byte 12: JSON strings must escape it"},
      {"{\"domain\":\"a\tb\"}",
       "a raw control character 0x09 in a string at "
       "byte 12: JSON strings must escape it"},
      {R"({"domain":"a\x"})",
       R"(an invalid escape '\x' at byte 12: JSON has \" \\ \/ \b \f \n \r \t and \uXXXX)"},
      {"{\"domain\":\"a\\", "an unterminated string at byte 12: it ends in a '\\'"},
      {R"({"domain":"a\u12"})", R"(an invalid \u escape at byte 12: expected four hex digits)"},
      {R"({"domain":"a\u12G4"})", R"(an invalid \u escape at byte 12: expected four hex digits)"},
      {R"({"domain":"\ud800"})", R"(a lone surrogate \uD800 at byte 11: not a Unicode character)"},
      {R"({"domain":"\uDC00\ud800"})",
       R"(a lone surrogate \uDC00 at byte 11: not a Unicode character)"},
      {R"({"domain":"\ud800\u0041"})",
       R"(a lone surrogate \uD800 at byte 11: not a Unicode character)"},
      {R"({"domain":"\ud800\n"})",
       R"(a lone surrogate \uD800 at byte 11: not a Unicode character)"},
      {R"({"domain":"abc)", "an unterminated string at byte 10: no closing '\"'"},
      {R"({"domain)", "an unterminated string at byte 1: no closing '\"'"},
      // UTF-8: a stray continuation byte, a byte never in UTF-8, overlong forms, a surrogate,
      // beyond U+10FFFF, and a sequence cut short (by the quote, by the end).
      {"{\"domain\":\"\x80\"}", "invalid UTF-8 at byte 11: RateLimitRequest strings must be UTF-8"},
      {"{\"domain\":\"a\xFF\"}",
       "invalid UTF-8 at byte 12: RateLimitRequest strings must be UTF-8"},
      {"{\"domain\":\"\xC0\x80\"}",
       "invalid UTF-8 at byte 11: RateLimitRequest strings must be UTF-8"},
      {"{\"domain\":\"\xE0\x80\x80\"}",
       "invalid UTF-8 at byte 11: RateLimitRequest strings must be UTF-8"},
      {"{\"domain\":\"\xED\xA0\x80\"}",
       "invalid UTF-8 at byte 11: RateLimitRequest strings must be UTF-8"},
      {"{\"domain\":\"\xF4\x90\x80\x80\"}",
       "invalid UTF-8 at byte 11: RateLimitRequest strings must be UTF-8"},
      {"{\"domain\":\"\xE2\x82\"}",
       "invalid UTF-8 at byte 11: RateLimitRequest strings must be UTF-8"},
      {"{\"domain\":\"\xF0\x9F\x98",
       "invalid UTF-8 at byte 11: RateLimitRequest strings must be UTF-8"},
      {"{\"d\xC3omain\":1}", "invalid UTF-8 at byte 3: RateLimitRequest strings must be UTF-8"},
      // Numbers.
      {R"({"hits_addend":01})", "an invalid number at byte 15: no leading zeros"},
      {R"({"hits_addend":-})", "an invalid number at byte 15: a digit must follow '-'"},
      {R"({"hits_addend":-a})", "an invalid number at byte 15: a digit must follow '-'"},
      {R"({"hits_addend":1.})", "an invalid number at byte 15: a digit must follow '.'"},
      {R"({"hits_addend":1.e3})", "an invalid number at byte 15: a digit must follow '.'"},
      {R"({"hits_addend":1e})",
       "an invalid number at byte 15: a digit must follow the exponent's 'e'"},
      {R"({"hits_addend":1E+})",
       "an invalid number at byte 15: a digit must follow the exponent's 'e'"},
      {R"({"hits_addend":.5})", "unexpected '.' at byte 15: expected a value"},
      {R"({"hits_addend":+1})", "unexpected '+' at byte 15: expected a value"},
      {R"({"hits_addend":0x10})", "unexpected 'x' at byte 16: expected ',' or '}'"},
      {R"({"hits_addend":NaN})", "unexpected 'N' at byte 15: expected a value"},
      {R"({"hits_addend":Infinity})", "unexpected 'I' at byte 15: expected a value"},
      // Literals.
      {R"({"limit":tru})", "an invalid literal at byte 9: expected true, false or null"},
      {R"({"limit":nul)", "an invalid literal at byte 9: expected true, false or null"},
      {R"({"limit":True})", "unexpected 'T' at byte 9: expected a value"},
      {R"({"limit":falsey})", "unexpected 'y' at byte 14: expected ',' or '}'"},
  };
  for (const Refusal& refusal : cases) {
    SCOPED_TRACE(refusal.body);
    const absl::Status status = CheckRateLimitRequestJson(refusal.body, refusal.max_elements);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(), refusal.message);
  }
}

// Verifies nesting is refused as it opens the 17th level, whether objects or arrays do it.
TEST(JsonRequestCheckTest, RefusesTheLevelPastTheDepthBudget) {
  std::string objects;
  for (int i = 0; i < 20; ++i) {
    objects += "{\"a\":";  // level i + 1 opens at byte 5 * i
  }
  const absl::Status deep_objects = CheckRateLimitRequestJson(objects, kMaxElements);
  EXPECT_EQ(deep_objects.message(), "nested too deep at byte 80: at most 16 levels");
  std::string mixed;
  for (int i = 0; i < 20; ++i) {
    mixed += "{\"a\":[";  // an object at byte 6 * i, an array after it
  }
  const absl::Status deep_mixed = CheckRateLimitRequestJson(mixed, kMaxElements);
  EXPECT_EQ(deep_mixed.message(), "nested too deep at byte 48: at most 16 levels");
}

// Verifies the 4 MB bodies of finding 6 and their kin are refused within their first bytes, with
// the message of the budget they break (protobuf spent up to 2.2 s on some of them).
TEST(JsonRequestCheckTest, RefusesHugeHostileBodiesAtTheirStart) {
  constexpr size_t kFourMiB = 4 << 20;
  const auto repeat = [&](std::string head, absl::string_view unit) {
    while (head.size() + unit.size() <= kFourMiB) {
      head.append(unit.data(), unit.size());
    }
    return head;
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {repeat("", "["),
       "unexpected '[' at byte 0: expected '{': a "
       "RateLimitRequest is a JSON object"},
      {repeat("{\"descriptors\":", "["),
       "an array inside an array at byte 16: RateLimitRequest JSON has no such "
       "field"},
      {repeat("", "{\"a\":"), "nested too deep at byte 80: at most 16 levels"},
      {repeat("{\"descriptors\":", "[{\"entries\":"),
       "nested too deep at byte 100: at most 16 levels"},
      {repeat("{\"descriptors\":[{}", ",{}"),
       "an array of more than 64 elements at byte 15: at most 64, the most "
       "descriptors or entries "
       "a request may have"},
      {repeat("{\"domain\":\"a\"", ",\"domain\":\"a\""),
       R"(duplicate key "domain" at byte 14 (first at byte 1))"},
  };
  for (const auto& [body, message] : cases) {
    SCOPED_TRACE(body.substr(0, 40));
    ASSERT_GT(body.size(), kFourMiB - 20);
    EXPECT_EQ(CheckRateLimitRequestJson(body, kMaxElements).message(), message);
  }
}

// Verifies a long duplicate key is shown cut, never inside an escape or a UTF-8 sequence.
TEST(JsonRequestCheckTest, ShowsALongDuplicateKeyCut) {
  const std::string key = std::string(62, 'k') + "\\u00e9" + std::string(40, 'k');
  const std::string body = "{\"" + key + "\":1,\"" + key + "\":2}";
  const absl::Status status = CheckRateLimitRequestJson(body, kMaxElements);
  EXPECT_THAT(status.message(),
              HasSubstr("duplicate key \"" + std::string(62, 'k') + "...\" at byte"));
  const std::string utf8_key = std::string(63, 'k') + "\xC3\xA9" + std::string(10, 'k');
  const std::string utf8_body = "{\"" + utf8_key + "\":1,\"" + utf8_key + "\":2}";
  EXPECT_THAT(CheckRateLimitRequestJson(utf8_body, kMaxElements).message(),
              HasSubstr("duplicate key \"" + std::string(63, 'k') + "...\" at byte"));
}

}  // namespace
}  // namespace sluice
