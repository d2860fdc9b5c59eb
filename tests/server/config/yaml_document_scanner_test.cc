#include "server/config/yaml_document_scanner.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "yaml-cpp/yaml.h"

namespace sluice {
namespace {

class YamlDocumentScannerTest : public ::testing::Test {
 protected:
  YamlBudget Budget(int64_t max_nodes, int64_t max_scalar_bytes) {
    YamlBudget budget;
    budget.max_nodes = max_nodes;
    budget.max_scalar_bytes = max_scalar_bytes;
    return budget;
  }
};

// Verifies a file is counted into the budget as loading will walk it: every node, and every
// alias as its anchor's whole content.
TEST_F(YamlDocumentScannerTest, CountsNodesAndScalarBytes) {
  YamlBudget budget = Budget(1000, 1000);
  // The map, three keys, "ab", the list [x, y] (3 nodes) and the alias of it (3 more): 11
  // nodes; bytes: "a" "ab" "b" "x" "y" "c" "x" "y" = 9.
  ASSERT_TRUE(ScanYamlText("s.yaml", "a: ab\nb: &l [x, y]\nc: *l\n", budget).ok());
  EXPECT_EQ(budget.nodes, 11);
  EXPECT_EQ(budget.scalar_bytes, 9);
  ASSERT_TRUE(ScanYamlText("t.yaml", "a: b\n", budget).ok());
  EXPECT_EQ(budget.nodes, 14);
}

// Verifies the file is refused at the node that passes the budget, naming the field.
TEST_F(YamlDocumentScannerTest, RefusesPastTheBudget) {
  YamlBudget budget = Budget(4, 1000);
  EXPECT_EQ(ScanYamlText("s.yaml", "a:\n  b: c\n", budget).message(),
            "s.yaml:2: a.b: the configuration grows past 4 YAML nodes (--config_max_nodes), "
            "counted over all files with every alias expanded each time it is used");
  budget = Budget(1000, 3);
  EXPECT_THAT(std::string(ScanYamlText("s.yaml", "ab: cd\n", budget).message()),
              ::testing::StartsWith("s.yaml:1: ab: the configuration grows past 3 bytes of YAML "
                                    "scalars (--config_max_scalar_bytes)"));
}

// Verifies a second document with content, and syntax errors, are refused with their line.
TEST_F(YamlDocumentScannerTest, RefusesSecondDocumentAndSyntaxErrors) {
  YamlBudget budget = Budget(1000, 1000);
  EXPECT_EQ(ScanYamlText("s.yaml", "a: 1\n---\nb: 2\n", budget).message(),
            "s.yaml:3: more than one YAML document in the file (one file holds one domain)");
  EXPECT_TRUE(ScanYamlText("s.yaml", "a: 1\n---\n", budget).ok());
  // Reading the first document only: the scan stops where the second starts, and says so.
  std::string rest;
  EXPECT_TRUE(ScanYamlText("s.yaml", "a: 1\n---\n", budget, &rest).ok());
  EXPECT_EQ(rest, "");
  EXPECT_TRUE(ScanYamlText("s.yaml", "a: 1\n---\nb: [2\n", budget, &rest).ok());
  EXPECT_THAT(rest, ::testing::StartsWith("s.yaml:3: ignored from here to the end of the file"));
  EXPECT_EQ(std::string(ScanYamlText("s.yaml", "a: 1\n b: 2\n", budget).message()),
            "s.yaml:2: YAML syntax error: illegal map value (column 3)");
}

// Verifies yaml-cpp's exceptions are turned into messages naming file, line and column.
TEST_F(YamlDocumentScannerTest, ExceptionsBecomeStatuses) {
  try {
    YAML::Load("a: [b\n");
    FAIL() << "no exception";
  } catch (const YAML::Exception& e) {
    const absl::Status status = YamlExceptionError("x.yaml", e);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), ::testing::StartsWith("x.yaml:2: YAML syntax "
                                                                     "error: "));
  }
}

}  // namespace
}  // namespace sluice
