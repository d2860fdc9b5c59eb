#include "server/stats/statsd_lines.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace sluice {
namespace {

constexpr absl::string_view kTagPrefix = ".__";

absl::string_view TypeSymbol(StatsdLineType type) {
  switch (type) {
    case StatsdLineType::kCounter:
      return "c";
    case StatsdLineType::kGauge:
      return "g";
    case StatsdLineType::kTimer:
      return "ms";
  }
  return "c";
}

}  // namespace

std::vector<StatsdTag> GostatsTagSet(const std::vector<StatsdTag>& tags) {
  std::map<std::string, std::string> kept;  // sorted by key, the last of a key kept
  for (const auto& [key, value] : tags) {
    if (key.empty() || value.empty()) {
      continue;
    }
    std::string clean = value;
    std::replace_if(
        clean.begin(), clean.end(), [](char c) { return c == '.' || c == ':' || c == '|'; }, '_');
    kept[key] = std::move(clean);
  }
  return std::vector<StatsdTag>(kept.begin(), kept.end());
}

std::string GostatsTaggedName(absl::string_view name, const std::vector<StatsdTag>& tags) {
  std::string out(name);
  for (const auto& [key, value] : tags) {
    absl::StrAppend(&out, kTagPrefix, key, "=", value);
  }
  return out;
}

SeparatedName SeparateGostatsTags(absl::string_view serialized) {
  SeparatedName out;
  const size_t first = serialized.find(kTagPrefix);
  if (first == absl::string_view::npos) {
    out.name = std::string(serialized);
    return out;
  }
  out.name = std::string(serialized.substr(0, first));
  for (absl::string_view pair :
       absl::StrSplit(serialized.substr(first + kTagPrefix.size()), kTagPrefix)) {
    const size_t eq = pair.find('=');
    if (eq == absl::string_view::npos) {
      continue;
    }
    out.tags.push_back(absl::StrCat(pair.substr(0, eq), ":", pair.substr(eq + 1)));
  }
  return out;
}

void AppendStatsdLine(std::string* out, absl::string_view name, absl::string_view value,
                      StatsdLineType type, absl::string_view rate,
                      const std::vector<std::string>& tags) {
  const size_t name_at = out->size();
  out->append(name.data(), name.size());
  std::replace(out->begin() + static_cast<std::ptrdiff_t>(name_at), out->end(), '\n', '_');
  absl::StrAppend(out, ":", value, "|", TypeSymbol(type));
  if (!rate.empty()) {
    absl::StrAppend(out, "|@", rate);
  }
  if (!tags.empty()) {
    out->append("|#");
    bool first = true;
    for (const std::string& tag : tags) {
      if (!first) {
        out->push_back(',');
      }
      first = false;
      for (char c : tag) {
        if (c != '\n') {
          out->push_back(c);
        }
      }
    }
  }
  out->push_back('\n');
}

std::string StatsdSampleRate(uint64_t count) {
  // 15 significant digits are exact to 5e-16 relative; taking 1e-13 off first keeps the text
  // below 1/count, so 1/rate is count plus a relative 1e-13 (under count + 1 for any count
  // below 10^13).
  return absl::StrFormat("%.15g", (1.0 / static_cast<double>(count)) * (1.0 - 1e-13));
}

void StatsdPayloads::Add(absl::string_view line) {
  if (!current_.empty() && current_.size() + line.size() > max_bytes_) {
    payloads_.push_back(std::move(current_));
    current_.clear();
  }
  current_.append(line.data(), line.size());
  if (current_.size() >= max_bytes_) {
    payloads_.push_back(std::move(current_));
    current_.clear();
  }
}

std::vector<std::string> StatsdPayloads::Take() {
  if (!current_.empty()) {
    payloads_.push_back(std::move(current_));
    current_.clear();
  }
  std::vector<std::string> out = std::move(payloads_);
  payloads_.clear();
  return out;
}

}  // namespace sluice
