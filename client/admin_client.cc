#include "client/admin_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/rls_client.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace sluice {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

std::optional<envoy::type::v3::RateLimitUnit> ParseUnit(absl::string_view unit) {
  static constexpr std::pair<absl::string_view, envoy::type::v3::RateLimitUnit> kUnits[] = {
      {"second", envoy::type::v3::SECOND}, {"minute", envoy::type::v3::MINUTE},
      {"hour", envoy::type::v3::HOUR},     {"day", envoy::type::v3::DAY},
      {"week", envoy::type::v3::WEEK},     {"month", envoy::type::v3::MONTH},
      {"year", envoy::type::v3::YEAR}};
  for (const auto& [name, value] : kUnits) {
    if (absl::EqualsIgnoreCase(unit, name)) {
      return value;
    }
  }
  return std::nullopt;
}

size_t WriteToString(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

// ---- Reading an answer (a google.protobuf.Struct of the JSON).

const Value* Field(const Struct& object, absl::string_view name) {
  auto it = object.fields().find(std::string(name));
  return it == object.fields().end() ? nullptr : &it->second;
}

std::string Text(const Struct& object, absl::string_view name) {
  const Value* value = Field(object, name);
  return value != nullptr && value->has_string_value() ? value->string_value() : "";
}

double Number(const Struct& object, absl::string_view name) {
  const Value* value = Field(object, name);
  return value != nullptr && value->has_number_value() ? value->number_value() : 0;
}

bool Flag(const Struct& object, absl::string_view name) {
  const Value* value = Field(object, name);
  return value != nullptr && value->has_bool_value() && value->bool_value();
}

const Struct* Object(const Struct& object, absl::string_view name) {
  const Value* value = Field(object, name);
  return value != nullptr && value->has_struct_value() ? &value->struct_value() : nullptr;
}

std::vector<const Value*> List(const Struct& object, absl::string_view name) {
  std::vector<const Value*> out;
  const Value* value = Field(object, name);
  if (value != nullptr && value->has_list_value()) {
    for (const Value& item : value->list_value().values()) {
      out.push_back(&item);
    }
  }
  return out;
}

// A JSON number as its integer when it is one (counts, times), else 17 digits.
std::string NumberText(double value) {
  if (std::nearbyint(value) == value && std::fabs(value) < 9007199254740992.0) {
    return absl::StrFormat("%.0f", value);
  }
  return absl::StrFormat("%.17g", value);
}

std::string Seconds(double micros) { return absl::StrFormat("%.3fs", micros / 1e6); }

std::string EntriesText(const Struct& descriptor) {
  std::vector<std::string> parts;
  for (const Value* entry : List(descriptor, "entries")) {
    if (entry->has_struct_value()) {
      parts.push_back(absl::StrCat(Text(entry->struct_value(), "key"), "=",
                                   Text(entry->struct_value(), "value")));
    }
  }
  std::string text = absl::StrJoin(parts, ",");
  const std::string limit = Text(descriptor, "limit_override");
  if (!limit.empty()) {
    absl::StrAppend(&text, " (limit ", limit, ")");
  }
  return text;
}

// "fixed_window 2/minute (charge if_admitted)", or with a burst and a multiplier.
std::string RuleText(const Struct& rule) {
  std::string text = absl::StrCat(Text(rule, "algorithm"), " ", NumberText(Number(rule, "limit")),
                                  "/");
  const double multiplier = Number(rule, "unit_multiplier");
  if (multiplier > 1) {
    absl::StrAppend(&text, NumberText(multiplier), " ");
  }
  absl::StrAppend(&text, Text(rule, "unit"));
  if (Field(rule, "burst") != nullptr) {
    absl::StrAppend(&text, " burst ", NumberText(Number(rule, "burst")));
  }
  absl::StrAppend(&text, " (charge ", Text(rule, "charge"));
  if (!Text(rule, "name").empty()) {
    absl::StrAppend(&text, ", name ", Text(rule, "name"));
  }
  if (Flag(rule, "request_override")) {
    absl::StrAppend(&text, ", the request's override");
  }
  return text + ")";
}

// The state's fields by name, in the order they read best.
std::string StateText(const Struct& state) {
  static constexpr absl::string_view kOrder[] = {
      "fresh",    "count",      "window_start_us", "current",        "previous",
      "tokens",   "last_refill_us", "level",       "last_leak_us",   "tat_us",
      "entries",  "total",      "oldest_us",       "newest_us"};
  std::vector<std::string> parts;
  for (absl::string_view name : kOrder) {
    const Value* value = Field(state, name);
    if (value == nullptr) {
      continue;
    }
    if (value->has_bool_value()) {
      parts.push_back(absl::StrCat(name, "=", value->bool_value() ? "true" : "false"));
    } else if (value->has_number_value()) {
      parts.push_back(absl::StrCat(name, "=", NumberText(value->number_value())));
    }
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, " ");
}

std::string KeyText(const Struct& key) {
  std::string text = Text(key, "key");
  if (!Flag(key, "exists")) {
    return text + "  (missing)";
  }
  const double ttl_ms = Number(key, "ttl_ms");
  absl::StrAppend(&text, "  (", ttl_ms < 0 ? "no expiry" : absl::StrCat("ttl ", Seconds(ttl_ms * 1000)));
  if (Field(key, "readable") != nullptr && !Flag(key, "readable")) {
    absl::StrAppend(&text, ", not this algorithm's state: read as a fresh key");
  }
  text += ")";
  if (!Text(key, "note").empty()) {
    absl::StrAppend(&text, "  note: ", Text(key, "note"));
  }
  return text;
}

std::string AnswerText(const Struct& answer) {
  std::string text =
      absl::StrCat(Flag(answer, "allowed") ? "allowed" : "DENIED", ", remaining ",
                   NumberText(Number(answer, "remaining")));
  if (!Flag(answer, "allowed")) {
    absl::StrAppend(&text, ", retry in ", Seconds(Number(answer, "retry_after_us")));
  }
  absl::StrAppend(&text, ", reset in ", Seconds(Number(answer, "reset_after_us")));
  return text;
}

std::string CacheText(const Struct& rule) {
  const Value* cache = Field(rule, "over_limit_cache");
  if (cache == nullptr || cache->has_null_value()) {
    return "no entry";
  }
  if (cache->has_string_value()) {
    return cache->string_value();  // "off"
  }
  if (!cache->has_struct_value()) {
    return "-";
  }
  const Struct& entry = cache->struct_value();
  return absl::StrCat("denies >= ", NumberText(Number(entry, "min_hits")), " hits for ",
                      Seconds(Number(entry, "denies_for_us")), " (limit ",
                      NumberText(Number(entry, "limit")), ")");
}

// Label and value lines, the labels padded to one width, indented.
void AppendRows(const std::vector<std::pair<std::string, std::string>>& rows, std::string* out) {
  size_t width = 0;
  for (const auto& row : rows) {
    width = std::max(width, row.first.size());
  }
  for (const auto& [label, value] : rows) {
    absl::StrAppend(out, "  ", label, std::string(width - label.size() + 2, ' '), value, "\n");
  }
}

absl::StatusOr<Struct> ParseAnswer(absl::string_view json) {
  Struct answer;
  auto status = google::protobuf::util::JsonStringToMessage(std::string(json), &answer);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not an admin API answer: ", status.message().as_string()));
  }
  return answer;
}

}  // namespace

absl::StatusOr<std::string> AdminRequestJson(absl::string_view domain,
                                             const std::vector<std::string>& descriptors,
                                             absl::string_view limit) {
  absl::StatusOr<RlsRequest> request = BuildRequest(domain, descriptors, 0);
  if (!request.ok()) {
    return request.status();
  }
  if (!limit.empty()) {
    const size_t slash = limit.find('/');
    uint32_t requests = 0;
    std::optional<envoy::type::v3::RateLimitUnit> unit;
    if (slash != absl::string_view::npos) {
      unit = ParseUnit(limit.substr(slash + 1));
    }
    if (slash == absl::string_view::npos || !absl::SimpleAtoi(limit.substr(0, slash), &requests) ||
        !unit.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--limit=", limit, " is not N/unit (second, minute, hour, day, week, month, year)"));
    }
    for (auto& descriptor : *request->mutable_descriptors()) {
      descriptor.mutable_limit()->set_requests_per_unit(requests);
      descriptor.mutable_limit()->set_unit(*unit);
    }
  }
  std::string json;
  auto status = google::protobuf::util::MessageToJsonString(*request, &json);
  if (!status.ok()) {
    return absl::InternalError(status.message().as_string());
  }
  return json;
}

absl::StatusOr<AdminAnswer> AdminPost(const std::string& http_address, absl::string_view path,
                                      const std::string& json, const std::string& token,
                                      absl::Duration timeout) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  if (curl == nullptr) {
    return absl::InternalError("libcurl cannot make a handle");
  }
  const std::string url = absl::StrCat("http://", http_address, path);
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  if (!token.empty()) {
    headers = curl_slist_append(headers, absl::StrCat("Authorization: Bearer ", token).c_str());
  }
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_list(headers,
                                                                          &curl_slist_free_all);
  AdminAnswer answer;
  char error[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDS, json.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDSIZE, static_cast<long>(json.size()));
  curl_easy_setopt(curl.get(), CURLOPT_HTTPHEADER, header_list.get());
  // Straight to the address named: the token is for it, not for a proxy the environment names.
  curl_easy_setopt(curl.get(), CURLOPT_PROXY, "");
  curl_easy_setopt(curl.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(timeout)));
  curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, &WriteToString);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &answer.body);
  curl_easy_setopt(curl.get(), CURLOPT_ERRORBUFFER, error);
  const CURLcode code = curl_easy_perform(curl.get());
  if (code != CURLE_OK) {
    return absl::UnavailableError(absl::StrCat(
        "POST ", url, ": ", error[0] != '\0' ? error : curl_easy_strerror(code)));
  }
  curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &answer.status);
  return answer;
}

absl::StatusOr<std::string> FormatInspectAnswer(absl::string_view json) {
  absl::StatusOr<Struct> answer = ParseAnswer(json);
  if (!answer.ok()) {
    return answer.status();
  }
  std::string out = absl::StrCat("domain ", Text(*answer, "domain"), ", backend ",
                                 Text(*answer, "backend"), "\n");
  for (const Value* item : List(*answer, "descriptors")) {
    if (!item->has_struct_value()) {
      continue;
    }
    const Struct& descriptor = item->struct_value();
    const std::string entries = EntriesText(descriptor);
    const std::vector<const Value*> rules = List(descriptor, "rules");
    if (rules.empty()) {
      absl::StrAppend(&out, "\n", entries, "  ",
                      Flag(descriptor, "unlimited") ? "unlimited: no limit applies"
                      : Flag(descriptor, "matched") ? "no rule applies"
                                                    : "matches no descriptor of the config",
                      "\n");
      continue;
    }
    for (const Value* rule_value : rules) {
      if (!rule_value->has_struct_value()) {
        continue;
      }
      const Struct& rule = rule_value->struct_value();
      absl::StrAppend(&out, "\n", entries, "  ", RuleText(rule), "\n");
      std::vector<std::pair<std::string, std::string>> rows;
      rows.emplace_back("storage key", Text(rule, "storage_key"));
      for (const Value* key : List(rule, "keys")) {
        if (key->has_struct_value()) {
          // A window's key is named by its role; a key that holds the state itself is "key".
          const std::string role = Text(key->struct_value(), "role");
          rows.emplace_back(role == "state" ? "key" : role, KeyText(key->struct_value()));
        }
      }
      const Struct* state = Object(rule, "state");
      rows.emplace_back("state", state != nullptr ? StateText(*state) : "-");
      const Struct* check = Object(rule, "check_of_0_hits");
      rows.emplace_back("0 hits now", check != nullptr ? AnswerText(*check) : "-");
      rows.emplace_back("cache here", CacheText(rule));
      AppendRows(rows, &out);
    }
  }
  return out;
}

absl::StatusOr<std::string> FormatResetAnswer(absl::string_view json) {
  absl::StatusOr<Struct> answer = ParseAnswer(json);
  if (!answer.ok()) {
    return answer.status();
  }
  std::vector<std::string> descriptors;
  for (const Value* item : List(*answer, "descriptors")) {
    if (item->has_struct_value()) {
      descriptors.push_back(EntriesText(item->struct_value()));
    }
  }
  const std::vector<const Value*> deleted = List(*answer, "deleted");
  std::string out = absl::StrCat("reset ", Text(*answer, "domain"), " ",
                                 absl::StrJoin(descriptors, "; "), ": ", deleted.size(),
                                 deleted.size() == 1 ? " key" : " keys", " deleted\n");
  for (const Value* key : deleted) {
    absl::StrAppend(&out, "  ", key->string_value(), "\n");
  }
  const double forgotten = Number(*answer, "forgotten_here");
  AppendRows({{"cache here", absl::StrCat(NumberText(forgotten),
                                           forgotten == 1 ? " entry" : " entries", " forgotten")},
              {"other replicas", Text(*answer, "other_replicas")},
              {"result", Text(*answer, "result")}},
             &out);
  return out;
}

}  // namespace sluice
