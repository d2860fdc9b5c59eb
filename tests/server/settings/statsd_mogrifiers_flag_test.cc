#include "server/settings/statsd_mogrifiers_flag.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

// Verifies the map text upstream's settings read EXTRA_TAGS and a mogrifier's TAGS in
// (envconfig v1.4.0): ',' between items, exactly one ':' in each, nothing trimmed, a repeated
// key keeping its place and its last value.
TEST(StatsdMogrifiersFlagTest, ReadsMapsAsEnvconfig) {
  auto pairs = ParseEnvconfigMap("domain:$1,descriptor:$2");
  ASSERT_TRUE(pairs.ok());
  EXPECT_THAT(*pairs, ElementsAre(Pair("domain", "$1"), Pair("descriptor", "$2")));
  pairs = ParseEnvconfigMap("a:1,b: 2,a:3");
  ASSERT_TRUE(pairs.ok());
  EXPECT_THAT(*pairs, ElementsAre(Pair("a", "3"), Pair("b", " 2")));
  pairs = ParseEnvconfigMap(":5,k:");  // read; the caller refuses or drops them
  ASSERT_TRUE(pairs.ok());
  EXPECT_THAT(*pairs, ElementsAre(Pair("", "5"), Pair("k", "")));
  EXPECT_THAT(*ParseEnvconfigMap("  "), IsEmpty());
  for (const char* bad : {"a", "a:b:c", "a:b,", "a:1,,b:2"}) {
    auto refused = ParseEnvconfigMap(bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr("invalid map item"));
  }
  EXPECT_EQ(EnvconfigMapText({{"a", "1"}, {"b", "2"}}), "a:1,b:2");
}

// Verifies the flag's text reads back what it was written from, whatever a pattern holds
// (backslashes, quotes, a control character), and that YAML as a person writes it reads too.
TEST(StatsdMogrifiersFlagTest, RoundTrips) {
  std::vector<StatsdMogrifierSettings> mogrifiers = {
      {"HITS", R"(^ratelimit\.service\.rate_limit\.([^.]+)\.(.*)\.([^.]+)$)",
       "ratelimit.service.rate_limit.$3", {{"domain", "$1"}, {"descriptor", "$2"}}},
      {"odd", "\"quoted\" \\d+ \t tab", "n", {}},
  };
  auto read = ParseStatsdMogrifiers(StatsdMogrifiersFlagText(mogrifiers));
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ((*read)[i].id, mogrifiers[i].id);
    EXPECT_EQ((*read)[i].pattern, mogrifiers[i].pattern);
    EXPECT_EQ((*read)[i].name, mogrifiers[i].name);
    EXPECT_EQ((*read)[i].tags, mogrifiers[i].tags);
  }
  auto yaml = ParseStatsdMogrifiers(
      "- pattern: '^some\\.original\\.metric\\.(.*)$'\n"
      "  name: some.original.metric\n"
      "  tags: domain:$1\n");
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  ASSERT_EQ(yaml->size(), 1u);
  EXPECT_EQ((*yaml)[0].pattern, "^some\\.original\\.metric\\.(.*)$");
  EXPECT_THAT((*yaml)[0].tags, ElementsAre(Pair("domain", "$1")));
  EXPECT_THAT(*ParseStatsdMogrifiers(""), IsEmpty());
  EXPECT_THAT(*ParseStatsdMogrifiers("[]"), IsEmpty());
}

// Verifies what the flag refuses, each message saying which mogrifier and why; a pattern that
// does not compile is refused here, with the other settings, not when statsd starts.
TEST(StatsdMogrifiersFlagTest, RefusesWhatCannotBeRead) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"[", "not YAML or JSON"},
      {"{pattern: x}", "not a list of mogrifiers"},
      {"[x]", "mogrifier 1: not a map"},
      {"[{pattern: x, name: y, colour: red}]", "mogrifier 1: unknown key 'colour'"},
      {"[{id: A, name: y}]", "mogrifier A: no pattern"},
      {"[{id: A, pattern: x}]", "mogrifier A: no name"},
      {"[{id: A, pattern: '(', name: y}]", "mogrifier A: pattern '(' does not compile: missing )"},
      {"[{id: A, pattern: x, name: y, tags: 'a:b:c'}]", "mogrifier A: tags: invalid map item"},
      {"[{id: A, pattern: x, name: y, tags: ':5'}]", "mogrifier A: tags: a tag with no key"},
      {"[{id: A, pattern: x, name: y, tags: 'k:'}]", "mogrifier A: tags: no value for tag k"},
      {"[{id: A, pattern: [x], name: y}]", "every key and value is a string"},
  };
  for (const auto& [text, message] : bad) {
    auto read = ParseStatsdMogrifiers(text);
    ASSERT_FALSE(read.ok()) << text;
    EXPECT_THAT(std::string(read.status().message()), HasSubstr(message)) << text;
  }
}

}  // namespace
}  // namespace sluice
