#include "tests/support/algorithm_cases.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/support/paths.h"

namespace sluice::testing {

namespace {

// The parser's own name table: this library must not link the algorithm library, whose
// ParseAlgorithm the tests check it against.
constexpr std::pair<absl::string_view, Algorithm> kAlgorithmNames[] = {
    {"fixed_window", Algorithm::kFixedWindow},
    {"sliding_window_log", Algorithm::kSlidingWindowLog},
    {"sliding_window_counter", Algorithm::kSlidingWindowCounter},
    {"token_bucket", Algorithm::kTokenBucket},
    {"leaky_bucket", Algorithm::kLeakyBucket},
    {"gcra", Algorithm::kGcra},
    {"concurrency", Algorithm::kConcurrency},
};

constexpr std::pair<absl::string_view, int64_t> kUnits[] = {
    {"us", 1},         {"ms", 1'000},        {"s", 1'000'000},
    {"m", 60'000'000}, {"h", 3'600'000'000}, {"d", 86'400'000'000},
};

// Decimal digits, '_' allowed only between two digits.
std::optional<uint64_t> ParseCount(absl::string_view text) {
  if (text.empty() || !absl::ascii_isdigit(text.front()) || !absl::ascii_isdigit(text.back())) {
    return std::nullopt;
  }
  std::string digits;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '_' && absl::ascii_isdigit(text[i - 1]) && absl::ascii_isdigit(text[i + 1])) {
      continue;
    }
    if (!absl::ascii_isdigit(text[i])) {
      return std::nullopt;
    }
    digits.push_back(text[i]);
  }
  uint64_t value = 0;
  if (!absl::SimpleAtoi(digits, &value)) {
    return std::nullopt;
  }
  return value;
}

// A duration in microseconds: a bare count, or one or more <count><unit> terms ("1m30s").
std::optional<int64_t> ParseDuration(absl::string_view text) {
  if (text.empty()) {
    return std::nullopt;
  }
  if (absl::ascii_isdigit(text.back())) {
    const std::optional<uint64_t> count = ParseCount(text);
    if (!count.has_value() || *count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return std::nullopt;
    }
    return static_cast<int64_t>(*count);
  }
  int64_t total = 0;
  while (!text.empty()) {
    size_t digits_end = 0;
    while (digits_end < text.size() && !absl::ascii_isalpha(text[digits_end])) {
      ++digits_end;
    }
    size_t unit_end = digits_end;
    while (unit_end < text.size() && absl::ascii_isalpha(text[unit_end])) {
      ++unit_end;
    }
    const absl::string_view unit = text.substr(digits_end, unit_end - digits_end);
    const auto* found = std::find_if(std::begin(kUnits), std::end(kUnits),
                                     [&](const auto& entry) { return entry.first == unit; });
    const std::optional<uint64_t> count = ParseCount(text.substr(0, digits_end));
    if (found == std::end(kUnits) || !count.has_value()) {
      return std::nullopt;
    }
    const int64_t scale = found->second;
    const int64_t room = std::numeric_limits<int64_t>::max() - total;
    if (*count > static_cast<uint64_t>(room / scale)) {
      return std::nullopt;
    }
    total += static_cast<int64_t>(*count) * scale;
    text.remove_prefix(unit_end);
  }
  return total;
}

class Parser {
 public:
  explicit Parser(absl::string_view file_name) : file_(file_name) {}

  absl::StatusOr<std::vector<AlgorithmCase>> Parse(absl::string_view text) {
    for (absl::string_view raw : absl::StrSplit(text, '\n')) {
      ++line_;
      absl::string_view content = raw.substr(0, raw.find('#'));
      std::vector<absl::string_view> words =
          absl::StrSplit(content, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
      if (words.empty()) {
        continue;
      }
      absl::Status status;
      if (words[0] == "case") {
        status = ParseCase(words);
      } else if (words[0] == "params") {
        status = ParseParams(words);
      } else if (words[0] == "at") {
        status = ParseStep(words);
      } else {
        status =
            Error(absl::StrCat("unknown statement '", words[0], "' (expected case, params or at)"));
      }
      if (!status.ok()) {
        return status;
      }
    }
    if (absl::Status status = FinishCase(); !status.ok()) {
      return status;
    }
    return std::move(cases_);
  }

 private:
  absl::Status Error(absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ":", line_, ": ", message));
  }

  absl::Status ParseCase(const std::vector<absl::string_view>& words) {
    if (absl::Status status = FinishCase(); !status.ok()) {
      return status;
    }
    if (words.size() != 2) {
      return Error("expected 'case <name>'");
    }
    const absl::string_view name = words[1];
    const bool valid = std::all_of(name.begin(), name.end(), [](char c) {
      return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_';
    });
    if (!valid) {
      return Error(absl::StrCat("case name '", name, "' must match [a-z0-9_]+"));
    }
    if (!names_.insert(std::string(name)).second) {
      return Error(absl::StrCat("duplicate case name '", name, "'"));
    }
    current_ = AlgorithmCase{};
    current_->file = file_;
    current_->line = line_;
    current_->name = std::string(name);
    has_params_ = false;
    return absl::OkStatus();
  }

  absl::Status ParseParams(const std::vector<absl::string_view>& words) {
    if (!current_.has_value()) {
      return Error("'params' before any 'case'");
    }
    if (has_params_) {
      return Error("a second 'params' line in one case");
    }
    if (!current_->steps.empty()) {
      return Error("'params' after the first step");
    }
    std::set<std::string> seen;
    LimitParams& params = current_->params;
    for (size_t i = 1; i < words.size(); ++i) {
      std::vector<absl::string_view> kv = absl::StrSplit(words[i], '=');
      if (kv.size() != 2) {
        return Error(absl::StrCat("expected <key>=<value>, got '", words[i], "'"));
      }
      const absl::string_view key = kv[0];
      const absl::string_view value = kv[1];
      if (!seen.insert(std::string(key)).second) {
        return Error(absl::StrCat("parameter '", key, "' given twice"));
      }
      if (key == "algorithm") {
        const auto* found = std::find_if(std::begin(kAlgorithmNames), std::end(kAlgorithmNames),
                                         [&](const auto& entry) { return entry.first == value; });
        if (found == std::end(kAlgorithmNames)) {
          return Error(absl::StrCat("unknown algorithm '", value, "'"));
        }
        params.algorithm = found->second;
      } else if (key == "limit" || key == "burst") {
        std::optional<uint64_t> count = ParseCount(value);
        if (!count.has_value()) {
          return Error(absl::StrCat("bad count '", value, "' for ", key));
        }
        (key == "limit" ? params.limit : params.burst) = *count;
      } else if (key == "period") {
        std::optional<int64_t> period = ParseDuration(value);
        if (!period.has_value() || *period <= 0) {
          return Error(absl::StrCat("bad period '", value, "' (a positive duration)"));
        }
        if (kCaseBaseUs % *period != 0) {
          return Error(absl::StrCat("period ", *period, "us does not divide the base time ",
                                    kCaseBaseUs, "us"));
        }
        params.period_us = *period;
      } else if (key == "charge") {
        if (value != "if_admitted" && value != "always") {
          return Error(absl::StrCat("bad charge '", value, "' (if_admitted or always)"));
        }
        params.charge = value == "always" ? Charge::kAlways : Charge::kIfAdmitted;
      } else {
        return Error(absl::StrCat("unknown parameter '", key,
                                  "' (expected algorithm=, limit=, period=, burst=, charge=)"));
      }
    }
    for (const char* required : {"algorithm", "limit", "period"}) {
      if (seen.count(required) == 0) {
        return Error(absl::StrCat("'params' needs ", required, "="));
      }
    }
    has_params_ = true;
    return absl::OkStatus();
  }

  absl::Status ParseStep(const std::vector<absl::string_view>& words) {
    if (!current_.has_value() || !has_params_) {
      return Error("a step before its case's 'params' line");
    }
    // at <time> hits|refund <count> -> allow|deny <field> <value> ...
    if (words.size() < 6 || (words[2] != "hits" && words[2] != "refund") || words[4] != "->") {
      return Error(
          "expected 'at <time> hits|refund <count> -> allow|deny remaining <n> retry <d> "
          "reset <d> [delay <d>]'");
    }
    CaseStep step;
    step.refund = words[2] == "refund";
    step.line = line_;
    absl::string_view time = words[1];
    const bool relative = absl::ConsumePrefix(&time, "+");
    std::optional<int64_t> at = ParseDuration(time);
    if (!at.has_value()) {
      return Error(absl::StrCat("bad time '", words[1], "'"));
    }
    const int64_t previous = current_->steps.empty() ? 0 : current_->steps.back().at_us;
    if (relative) {
      if (*at > std::numeric_limits<int64_t>::max() - previous) {
        return Error(absl::StrCat("time '", words[1], "' overflows"));
      }
      *at += previous;
    }
    if (*at < previous) {
      return Error(absl::StrCat("time ", *at, " is before the previous step's ", previous));
    }
    step.at_us = *at;
    std::optional<uint64_t> hits = ParseCount(words[3]);
    if (!hits.has_value()) {
      return Error(absl::StrCat("bad hits '", words[3], "'"));
    }
    step.hits = *hits;
    if (words[5] == "allow") {
      step.expected.allowed = true;
    } else if (words[5] != "deny") {
      return Error(absl::StrCat("expected allow or deny, got '", words[5], "'"));
    }
    std::set<std::string> seen;
    for (size_t i = 6; i < words.size(); i += 2) {
      const absl::string_view field = words[i];
      if (i + 1 >= words.size()) {
        return Error(absl::StrCat("field '", field, "' has no value"));
      }
      if (!seen.insert(std::string(field)).second) {
        return Error(absl::StrCat("field '", field, "' given twice"));
      }
      const absl::string_view value = words[i + 1];
      if (field == "remaining") {
        std::optional<uint64_t> remaining = ParseCount(value);
        if (!remaining.has_value()) {
          return Error(absl::StrCat("bad remaining '", value, "'"));
        }
        step.expected.remaining = *remaining;
        continue;
      }
      int64_t* target = field == "retry"   ? &step.expected.retry_after_us
                        : field == "reset" ? &step.expected.reset_after_us
                        : field == "delay" ? &step.expected.delay_us
                                           : nullptr;
      if (target == nullptr) {
        return Error(
            absl::StrCat("unknown field '", field, "' (expected remaining, retry, reset, delay)"));
      }
      std::optional<int64_t> duration = ParseDuration(value);
      if (!duration.has_value()) {
        return Error(absl::StrCat("bad duration '", value, "' for ", field));
      }
      *target = *duration;
    }
    for (const char* required : {"remaining", "retry", "reset"}) {
      if (seen.count(required) == 0) {
        return Error(absl::StrCat("step needs '", required, " <value>'"));
      }
    }
    current_->steps.push_back(step);
    return absl::OkStatus();
  }

  // Closes the open case, if any; a case without params or steps is an error at its line.
  absl::Status FinishCase() {
    if (!current_.has_value()) {
      return absl::OkStatus();
    }
    if (!has_params_ || current_->steps.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(file_, ":", current_->line, ": case '", current_->name,
                       "' needs a 'params' line and at least one 'at' step"));
    }
    cases_.push_back(std::move(*current_));
    current_.reset();
    return absl::OkStatus();
  }

  std::string file_;
  int line_ = 0;
  std::optional<AlgorithmCase> current_;
  bool has_params_ = false;
  std::set<std::string> names_;
  std::vector<AlgorithmCase> cases_;
};

}  // namespace

absl::StatusOr<std::vector<AlgorithmCase>> ParseAlgorithmCases(absl::string_view text,
                                                               absl::string_view file_name) {
  return Parser(file_name).Parse(text);
}

absl::StatusOr<std::vector<AlgorithmCase>> ReadAlgorithmCaseFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return ParseAlgorithmCases(text.str(), path);
}

std::vector<std::string> AlgorithmCaseFiles() {
  std::vector<std::string> files;
  const std::filesystem::path dir = std::filesystem::path(testing::SourceDir()) / "tests" / "cases";
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.is_regular_file() && entry.path().extension() == ".cases") {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string FormatDecision(const Decision& decision) {
  return absl::StrCat(decision.allowed ? "allow" : "deny", " remaining ", decision.remaining,
                      " retry ", decision.retry_after_us, " reset ", decision.reset_after_us,
                      " delay ", decision.delay_us);
}

std::string FormatParams(const LimitParams& params) {
  absl::string_view name = "unknown";
  for (const auto& [known_name, algorithm] : kAlgorithmNames) {
    if (algorithm == params.algorithm) {
      name = known_name;
    }
  }
  return absl::StrCat("algorithm=", name, " limit=", params.limit, " period=", params.period_us,
                      "us burst=", params.burst, " charge=",
                      params.charge == Charge::kAlways ? "always" : "if_admitted");
}

std::string StepLocation(const AlgorithmCase& test_case, const CaseStep& step) {
  return absl::StrCat(test_case.file, ":", step.line);
}

const LoadedAlgorithmCases& AllAlgorithmCases() {
  static const LoadedAlgorithmCases* loaded = [] {
    auto* result = new LoadedAlgorithmCases;
    for (const std::string& file : AlgorithmCaseFiles()) {
      absl::StatusOr<std::vector<AlgorithmCase>> cases = ReadAlgorithmCaseFile(file);
      if (!cases.ok()) {
        result->errors.push_back(std::string(cases.status().message()));
        continue;
      }
      for (AlgorithmCase& test_case : *cases) {
        result->cases.push_back(std::move(test_case));
      }
    }
    return result;
  }();
  return *loaded;
}

std::string CaseFileStem(const std::string& path) {
  return std::filesystem::path(path).stem().string();
}

}  // namespace sluice::testing
