#include "server/config/yaml_fields.h"

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "yaml-cpp/yaml.h"

namespace sluice {
namespace {

class YamlFieldsTest : public ::testing::Test {
 protected:
  // The entries of the map `text`, read as the map at path "m" with keys a, b and c allowed.
  absl::StatusOr<MapEntries> Entries(absl::string_view text) {
    root_ = YAML::Load(std::string(text));
    return reader_.ReadMap(root_, "m", 1, {"a", "b", "c"});
  }
  // Entry "a" of `text` read as a boolean.
  Field<bool> Bool(absl::string_view text) {
    Field<bool> field;
    absl::StatusOr<MapEntries> entries = Entries(text);
    EXPECT_TRUE(entries.ok()) << entries.status();
    reader_.ReadBool(*entries, "a", "m", field);
    return field;
  }
  Field<uint32_t> Uint32(absl::string_view text) {
    Field<uint32_t> field;
    absl::StatusOr<MapEntries> entries = Entries(text);
    EXPECT_TRUE(entries.ok()) << entries.status();
    reader_.ReadUint32(*entries, "a", "m", field);
    return field;
  }
  Field<double> Number(absl::string_view text) {
    Field<double> field;
    absl::StatusOr<MapEntries> entries = Entries(text);
    EXPECT_TRUE(entries.ok()) << entries.status();
    reader_.ReadNumber(*entries, "a", "m", "a fraction", field);
    return field;
  }

  YamlFieldReader reader_{"f.yaml"};
  YAML::Node root_;
};

// Verifies merge keys: the map's own keys win, then the first merged map; lines are the keys'.
TEST_F(YamlFieldsTest, ExpandsMergeKeys) {
  const YAML::Node root =
      YAML::Load("x: &x {a: 1, b: 2}\ny: &y {b: 3, c: 4}\nm:\n  <<: [*x, *y]\n  a: 5\n");
  absl::StatusOr<MapEntries> merged = reader_.ReadMap(root["m"], "m", 3, {"a", "b", "c"});
  ASSERT_TRUE(merged.ok()) << merged.status();
  ASSERT_EQ(merged->size(), 3u);
  EXPECT_EQ(FindEntry(*merged, "a")->value.Scalar(), "5");
  EXPECT_EQ(FindEntry(*merged, "a")->line, 5);
  EXPECT_EQ(FindEntry(*merged, "b")->value.Scalar(), "2");
  EXPECT_EQ(FindEntry(*merged, "c")->value.Scalar(), "4");
  EXPECT_EQ(FindEntry(*merged, "c")->line, 2);
  EXPECT_EQ(FindEntry(*merged, "d"), nullptr);
}

// Verifies repeated, unknown and non-string keys and bad merge keys are refused with the path.
TEST_F(YamlFieldsTest, RefusesBadKeys) {
  EXPECT_EQ(Entries("a: 1\na: 2\n").status().message(),
            "f.yaml:2: m.a: duplicate key (first given at line 1)");
  EXPECT_EQ(Entries("a: 1\nd: 2\n").status().message(),
            "f.yaml:2: m.d: unknown key (expected a, b, c)");
  EXPECT_EQ(Entries("? [a]\n: 1\n").status().message(),
            "f.yaml:1: m: map keys must be strings, got a list");
  EXPECT_EQ(Entries("<<: [1]\n").status().message(),
            "f.yaml:1: m.<<: expected a map or a list of maps, got a list holding '1'");
  EXPECT_TRUE(Entries("'<<': 1\n").status().message().find("unknown key") !=
              absl::string_view::npos);  // a quoted "<<" is a name, not a merge
}

// Verifies YAML 1.1 booleans are read unquoted, and anything else is kept as the field's error.
TEST_F(YamlFieldsTest, ReadsBooleans) {
  for (absl::string_view yes : {"true", "True", "yes", "ON", "y"}) {
    const Field<bool> field = Bool(absl::StrCat("a: ", yes, "\n"));
    EXPECT_TRUE(field.given && field.read_error.ok() && field.value) << yes;
  }
  for (absl::string_view no : {"false", "No", "off", "N"}) {
    const Field<bool> field = Bool(absl::StrCat("b: 1\na: ", no, "\n"));
    EXPECT_TRUE(field.given && field.read_error.ok() && !field.value) << no;
    EXPECT_EQ(field.line, 2);
  }
  EXPECT_EQ(Bool("a: 'yes'\n").read_error.message(),
            "f.yaml:1: m.a: expected true or false, got the quoted string 'yes'");
  EXPECT_EQ(Bool("a: maybe\n").read_error.message(),
            "f.yaml:1: m.a: expected true or false, got 'maybe'");
  EXPECT_EQ(Bool("a:\n").read_error.message(),
            "f.yaml:1: m.a: expected true or false, got nothing");
  EXPECT_FALSE(Bool("b: 1\n").given);
}

// Verifies unsigned integers: plain digits within 32 bits, no quotes, no octal-looking zero.
TEST_F(YamlFieldsTest, ReadsUnsignedIntegers) {
  EXPECT_EQ(Uint32("a: 4294967295\n").value, 4294967295u);
  EXPECT_EQ(Uint32("a: +7\n").value, 7u);
  EXPECT_EQ(Uint32("a: 0\n").value, 0u);
  const std::string expected = "f.yaml:1: m.a: expected an unsigned 32-bit integer, got ";
  EXPECT_EQ(Uint32("a: 4294967296\n").read_error.message(),
            "f.yaml:1: m.a: 4294967296 is out of range (at most 4294967295)");
  EXPECT_EQ(Uint32("a: '5'\n").read_error.message(), expected + "the quoted string '5'");
  EXPECT_EQ(Uint32("a: 05\n").read_error.message(),
            expected + "'05' (a leading zero means octal in YAML 1.1)");
  EXPECT_EQ(Uint32("a: -1\n").read_error.message(), expected + "'-1'");
  EXPECT_EQ(Uint32("a: [1]\n").read_error.message(), expected + "a list");
  EXPECT_EQ(Uint32("a: x\n").value, 0u);  // unset on error
}

// Verifies numbers are read in decimal notation only, range left to the validator.
TEST_F(YamlFieldsTest, ReadsNumbers) {
  EXPECT_EQ(Number("a: 0.25\n").value, 0.25);
  EXPECT_EQ(Number("a: 1e-3\n").value, 0.001);
  EXPECT_EQ(Number("a: 7\n").value, 7);  // out of any range: not this reader's to say
  EXPECT_EQ(Number("a: .nan\n").read_error.message(),
            "f.yaml:1: m.a: expected a fraction, got '.nan'");
  EXPECT_EQ(Number("a: 0x1p-1\n").read_error.message(),
            "f.yaml:1: m.a: expected a fraction, got '0x1p-1'");
  EXPECT_EQ(Number("a: '0.5'\n").read_error.message(),
            "f.yaml:1: m.a: expected a fraction, got the quoted string '0.5'");
}

// Verifies a string is any scalar's text, empty for null, and refused for a collection.
TEST_F(YamlFieldsTest, ReadsStrings) {
  absl::StatusOr<MapEntries> entries = Entries("a: 404\nb: ~\nc: {x: 1}\n");
  ASSERT_TRUE(entries.ok()) << entries.status();
  Field<std::string> a;
  Field<std::string> b;
  Field<std::string> c;
  reader_.ReadString(*entries, "a", "m", a);
  reader_.ReadString(*entries, "b", "m", b);
  reader_.ReadString(*entries, "c", "", c);
  EXPECT_EQ(a.value, "404");
  EXPECT_TRUE(b.given);
  EXPECT_EQ(b.value, "");
  EXPECT_EQ(c.read_error.message(), "f.yaml:3: c: expected a string, got a map");
}

}  // namespace
}  // namespace sluice
