// Shared rate-limit algorithm cases: a parser for the tests/cases/*.cases files, which hold the
// expected decisions of every algorithm as data. The C++ algorithms (algorithm_cases_test.cc)
// and the Lua scripts on Redis run the same files, so both implement one behaviour. Depends
// only on the types of server/algorithm/algorithm.h, not on the algorithm library.
//
// Format, one statement per line; '#' starts a comment; blank lines are ignored:
//
//   case <name>
//   params algorithm=<name> limit=<count> period=<duration> [burst=<count>]
//          [charge=if_admitted|always]
//   at <time> hits|refund <count> -> allow|deny remaining <count> retry <duration>
//                                    reset <duration> [delay <duration>]
//
// - A case opens with `case` (name: [a-z0-9_]+, unique in its file), then exactly one `params`
//   line, then one or more `at` steps run in order against one fresh key.
// - <count> is a decimal integer; '_' may separate digits (1_000).
// - <duration> is microseconds: a bare <count>, or one or more <count><unit> terms with units
//   us, ms, s, m, h, d (250ms, 1m30s, 1d).
// - <time> is an offset from kCaseBaseUs, or "+<duration>" after the previous step's time.
//   Times never decrease within a case (equal times model a clock that did not move).
// - `hits <count>` is a request (sluice::Evaluate); `refund <count>` gives back (sluice::Refund).
// - Each step states the whole expected Decision: verdict, remaining, retry_after_us,
//   reset_after_us and (optionally, default 0) delay_us. The fields may come in any order.
// - The period must divide kCaseBaseUs, so window boundaries fall at round offsets.
//
// Pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/algorithm/algorithm.h"

namespace sluice::testing {

// The moment every case's offsets are measured from: 2023-11-15T00:00:00Z in microseconds,
// a whole number of days, so every period that divides a day also divides it.
inline constexpr int64_t kCaseBaseUs = 1'700'006'400'000'000;

struct CaseStep {
  int line = 0;       // 1-based line of the step in its file
  int64_t at_us = 0;  // offset from kCaseBaseUs; the request runs at kCaseBaseUs + at_us
  uint64_t hits = 0;
  bool refund = false;  // `refund <count>`: sluice::Refund of `hits`
  Decision expected;
};

struct AlgorithmCase {
  std::string file;  // the file name given to the parser
  int line = 0;      // line of the `case` statement
  std::string name;
  LimitParams params;
  std::vector<CaseStep> steps;  // run in order against one fresh key
};

// Parses the text of one case file. `file_name` only labels errors and cases.
// Errors are kInvalidArgument and start with "<file_name>:<line>: ".
absl::StatusOr<std::vector<AlgorithmCase>> ParseAlgorithmCases(absl::string_view text,
                                                               absl::string_view file_name);

// Reads and parses the case file at `path`; kNotFound if it cannot be read.
absl::StatusOr<std::vector<AlgorithmCase>> ReadAlgorithmCaseFile(const std::string& path);

// Every tests/cases/*.cases file of the source tree (testing::SourceDir()), sorted by path.
std::vector<std::string> AlgorithmCaseFiles();

// Every case of every file of AlgorithmCaseFiles(), loaded once per process; a file that fails
// to parse is kept as its error message instead.
struct LoadedAlgorithmCases {
  std::vector<AlgorithmCase> cases;
  std::vector<std::string> errors;
};
const LoadedAlgorithmCases& AllAlgorithmCases();

// "dir/token_bucket.cases" -> "token_bucket".
std::string CaseFileStem(const std::string& path);

// `decision` in the syntax of a step's expectation, e.g.
// "allow remaining 9 retry 0 reset 100000 delay 0", for failure messages.
std::string FormatDecision(const Decision& decision);

// `params` in the syntax of a `params` line, e.g.
// "algorithm=token_bucket limit=10 period=1000000us burst=10", for failure messages.
std::string FormatParams(const LimitParams& params);

// "<file>:<line>" of a step, for failure messages.
std::string StepLocation(const AlgorithmCase& test_case, const CaseStep& step);

}  // namespace sluice::testing
