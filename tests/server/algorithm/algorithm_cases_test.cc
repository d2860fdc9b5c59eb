// Runs every shared case file in tests/cases/ against the C++ algorithms, and tests the case
// file parser itself.
#include "tests/support/algorithm_cases.h"

#include <filesystem>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/algorithm/algorithm.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;


}  // namespace

// Names a case by where it is written, instead of gtest's byte dump.
void PrintTo(const AlgorithmCase& test_case, std::ostream* os) {
  *os << test_case.file << ":" << test_case.line << " case " << test_case.name;
}

namespace {

class AlgorithmCasesTest : public ::testing::TestWithParam<AlgorithmCase> {};

// Verifies that the C++ algorithm produces every step's expected decision, in order, on one key.
TEST_P(AlgorithmCasesTest, MatchesExpectedDecisions) {
  const AlgorithmCase& test_case = GetParam();
  AlgorithmState state = NewState(test_case.params.algorithm);
  for (const CaseStep& step : test_case.steps) {
    const int64_t now = kCaseBaseUs + step.at_us;
    const Decision actual = step.refund ? Refund(test_case.params, state, now, step.hits)
                                        : Evaluate(test_case.params, state, now, step.hits);
    EXPECT_EQ(FormatDecision(actual), FormatDecision(step.expected))
        << StepLocation(test_case, step) << ": case " << test_case.name << ", at " << step.at_us
        << (step.refund ? " refund " : " hits ") << step.hits;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, AlgorithmCasesTest, ::testing::ValuesIn(AllAlgorithmCases().cases),
                         [](const ::testing::TestParamInfo<AlgorithmCase>& info) {
                           return absl::StrCat(CaseFileStem(info.param.file), "_", info.param.name);
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AlgorithmCasesTest);

class AlgorithmCaseFilesTest : public ::testing::Test {};

// Verifies that every case file parses.
TEST_F(AlgorithmCaseFilesTest, EveryFileParses) {
  EXPECT_THAT(AllAlgorithmCases().errors, ::testing::IsEmpty());
}

// Verifies that each algorithm has its own file, holding only its cases, and enough of them.
TEST_F(AlgorithmCaseFilesTest, EveryAlgorithmHasItsOwnFile) {
  std::map<std::string, int> cases_per_file;
  for (const AlgorithmCase& test_case : AllAlgorithmCases().cases) {
    EXPECT_EQ(CaseFileStem(test_case.file), AlgorithmName(test_case.params.algorithm))
        << test_case.file << ":" << test_case.line << ": case " << test_case.name;
    ++cases_per_file[CaseFileStem(test_case.file)];
  }
  for (const char* name : {"fixed_window", "sliding_window_log", "sliding_window_counter",
                           "token_bucket", "leaky_bucket", "gcra"}) {
    EXPECT_GE(cases_per_file[name], 12) << name << ".cases";
  }
  EXPECT_GE(cases_per_file["concurrency"], 4);  // the sliding window log's arithmetic
}

class AlgorithmCaseParserTest : public ::testing::Test {
 protected:
  static std::string ErrorOf(absl::string_view text) {
    absl::StatusOr<std::vector<AlgorithmCase>> cases = ParseAlgorithmCases(text, "t.cases");
    return cases.ok() ? "ok" : std::string(cases.status().message());
  }
};

// Verifies that a full case parses into params and steps, with units and relative times.
TEST_F(AlgorithmCaseParserTest, ParsesCase) {
  absl::StatusOr<std::vector<AlgorithmCase>> cases = ParseAlgorithmCases(
      "# leading comment\n"
      "case leaky\n"
      "params algorithm=leaky_bucket limit=3 period=1s burst=2_000  # trailing comment\n"
      "\n"
      "at 250ms hits 2 -> allow remaining 1998 retry 0 reset 666_667 delay 0\n"
      "at +1m hits 0 -> deny reset 1us retry 2h remaining 0 delay 1d\n"
      "at +1h1m1s1ms1us hits 1 -> allow remaining 0 retry 0 reset 0\n",
      "t.cases");
  ASSERT_TRUE(cases.ok()) << cases.status();
  ASSERT_EQ(cases->size(), 1u);
  const AlgorithmCase& c = (*cases)[0];
  EXPECT_EQ(c.name, "leaky");
  EXPECT_EQ(c.file, "t.cases");
  EXPECT_EQ(c.line, 2);
  EXPECT_EQ(c.params.algorithm, Algorithm::kLeakyBucket);
  EXPECT_EQ(c.params.limit, 3u);
  EXPECT_EQ(c.params.period_us, 1'000'000);
  EXPECT_EQ(c.params.burst, 2000u);
  ASSERT_EQ(c.steps.size(), 3u);
  EXPECT_EQ(c.steps[0].line, 5);
  EXPECT_EQ(c.steps[0].at_us, 250'000);
  EXPECT_EQ(c.steps[0].hits, 2u);
  EXPECT_EQ(FormatDecision(c.steps[0].expected),
            "allow remaining 1998 retry 0 reset 666667 delay 0");
  EXPECT_EQ(c.steps[1].at_us, 60'250'000);
  EXPECT_EQ(FormatDecision(c.steps[1].expected),
            "deny remaining 0 retry 7200000000 reset 1 delay 86400000000");
  EXPECT_EQ(c.steps[2].at_us, 60'250'000 + 3'661'001'001);
}

// Verifies that the parser knows each algorithm by the name ParseAlgorithm gives it.
TEST_F(AlgorithmCaseParserTest, KnowsEveryAlgorithmByItsConfigName) {
  for (int i = 0; i < kAlgorithmCount; ++i) {
    const Algorithm algorithm = static_cast<Algorithm>(i);
    absl::StatusOr<std::vector<AlgorithmCase>> cases = ParseAlgorithmCases(
        absl::StrCat("case c\nparams algorithm=", AlgorithmName(algorithm),
                     " limit=1 period=1s\nat 0 hits 1 -> allow remaining 0 retry 0 reset 0\n"),
        "t.cases");
    ASSERT_TRUE(cases.ok()) << cases.status();
    EXPECT_EQ((*cases)[0].params.algorithm, algorithm) << AlgorithmName(algorithm);
    EXPECT_EQ(ParseAlgorithm(AlgorithmName(algorithm)), algorithm);
  }
}

// Verifies that each kind of mistake is rejected with the file and line that holds it.
TEST_F(AlgorithmCaseParserTest, ErrorsNameFileAndLine) {
  const std::string head = "case c\nparams algorithm=gcra limit=1 period=1s burst=1\n";
  const std::string ok_step = "at 0 hits 1 -> allow remaining 0 retry 0 reset 0\n";
  EXPECT_THAT(ErrorOf("\n\nbogus line\n"), HasSubstr("t.cases:3: unknown statement 'bogus'"));
  EXPECT_THAT(ErrorOf("params algorithm=gcra limit=1 period=1s\n"),
              HasSubstr("t.cases:1: 'params' before any 'case'"));
  EXPECT_THAT(ErrorOf("case c\nparams algorithm=nope limit=1 period=1s\n"),
              HasSubstr("t.cases:2: unknown algorithm 'nope'"));
  EXPECT_THAT(ErrorOf("case c\nparams algorithm=gcra limit=x period=1s\n"),
              HasSubstr("t.cases:2: bad count 'x' for limit"));
  EXPECT_THAT(ErrorOf("case c\nparams algorithm=gcra limit=1\n"),
              HasSubstr("t.cases:2: 'params' needs period="));
  EXPECT_THAT(ErrorOf("case c\nparams algorithm=gcra limit=1 period=7s\n"),
              HasSubstr("t.cases:2: period 7000000us does not divide the base time"));
  EXPECT_THAT(ErrorOf("case c\nparams algorithm=gcra limit=1 period=0\n"),
              HasSubstr("t.cases:2: bad period '0'"));
  EXPECT_THAT(ErrorOf("case c\nparams algorithm=gcra limit=1 period=1s color=red\n"),
              HasSubstr("t.cases:2: unknown parameter 'color'"));
  EXPECT_THAT(ErrorOf("case c\nat 0 hits 1 -> allow remaining 0 retry 0 reset 0\n"),
              HasSubstr("t.cases:2: a step before its case's 'params' line"));
  EXPECT_THAT(ErrorOf(head + "at 5 hits 1 -> allow remaining 0 retry 0 reset 0\n" +
                      "at 4 hits 1 -> allow remaining 0 retry 0 reset 0\n"),
              HasSubstr("t.cases:4: time 4 is before the previous step's 5"));
  EXPECT_THAT(ErrorOf(head + "at 0 hits 1 -> maybe remaining 0 retry 0 reset 0\n"),
              HasSubstr("t.cases:3: expected allow or deny, got 'maybe'"));
  EXPECT_THAT(ErrorOf(head + "at 0 hits 1 -> allow remaining 0 retry 0\n"),
              HasSubstr("t.cases:3: step needs 'reset <value>'"));
  EXPECT_THAT(ErrorOf(head + "at 0 hits 1 -> allow remaining 0 retry 0 reset 1fortnight\n"),
              HasSubstr("t.cases:3: bad duration '1fortnight' for reset"));
  EXPECT_THAT(ErrorOf(head + "at 0 hits 1 -> allow remaining 0 retry 0 reset 0 reset 1\n"),
              HasSubstr("t.cases:3: field 'reset' given twice"));
  EXPECT_THAT(ErrorOf(head + "at 1s1 hits 1 -> allow remaining 0 retry 0 reset 0\n"),
              HasSubstr("t.cases:3: bad time '1s1'"));
  EXPECT_THAT(ErrorOf(head + "at + hits 1 -> allow remaining 0 retry 0 reset 0\n"),
              HasSubstr("t.cases:3: bad time '+'"));
  EXPECT_THAT(ErrorOf(head + "at ms hits 1 -> allow remaining 0 retry 0 reset 0\n"),
              HasSubstr("t.cases:3: bad time 'ms'"));
  EXPECT_THAT(ErrorOf(head + "at 0 hits 1_ -> allow remaining 0 retry 0 reset 0\n"),
              HasSubstr("t.cases:3: bad hits '1_'"));
  EXPECT_THAT(ErrorOf(head + "at 0 hits 1 allow remaining 0 retry 0 reset 0\n"),
              HasSubstr("t.cases:3: expected 'at <time> hits|refund <count> ->"));
  EXPECT_THAT(ErrorOf(head + ok_step + head), HasSubstr("t.cases:4: duplicate case name 'c'"));
  EXPECT_THAT(ErrorOf("x\n" + head), HasSubstr("t.cases:1:"));
  EXPECT_THAT(ErrorOf("\ncase empty\ncase d\n"),
              HasSubstr("t.cases:2: case 'empty' needs a 'params' line and at least one"));
  EXPECT_THAT(ErrorOf(head), HasSubstr("t.cases:1: case 'c' needs a 'params' line"));
  EXPECT_EQ(ErrorOf(head + ok_step), "ok");
}

// Verifies that a missing file is reported as not found, naming the path.
TEST_F(AlgorithmCaseParserTest, MissingFileIsNotFound) {
  absl::StatusOr<std::vector<AlgorithmCase>> cases = ReadAlgorithmCaseFile("/nonexistent/x.cases");
  ASSERT_FALSE(cases.ok());
  EXPECT_EQ(cases.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(cases.status().message(), HasSubstr("/nonexistent/x.cases"));
}

}  // namespace
}  // namespace sluice::testing
