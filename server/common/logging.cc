#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
#include "server/common/logging.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include "server/common/clock.h"
#include "server/common/json_string.h"

namespace sluice {
namespace {

std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_format{static_cast<int>(LogFormat::kText)};

// The level's name in JSON lines; its first letter, upper-cased, starts a text line.
const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
    case LogLevel::kFatal:
      return "fatal";
  }
  return "unknown";
}

// "2026-11-24T02:34:14.220473Z"
std::string Timestamp(int64_t now_us) {
  time_t secs = static_cast<time_t>(now_us / 1000000);
  tm parts;
  gmtime_r(&secs, &parts);
  char when[48];
  const size_t n = std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &parts);
  std::snprintf(when + n, sizeof(when) - n, ".%06lldZ", static_cast<long long>(now_us % 1000000));
  return when;
}

}  // namespace

void SetMinLogLevel(LogLevel level) { g_min_level.store(static_cast<int>(level)); }

LogLevel MinLogLevel() { return static_cast<LogLevel>(g_min_level.load(std::memory_order_relaxed)); }

void SetLogFormat(LogFormat format) { g_format.store(static_cast<int>(format)); }

absl::string_view LogLevelName(LogLevel level) { return LevelName(level); }

absl::string_view LogFormatName(LogFormat format) {
  return format == LogFormat::kJson ? "json" : "text";
}

bool ParseLogFormat(absl::string_view text, LogFormat* format) {
  if (text == "text") {
    *format = LogFormat::kText;
  } else if (text == "json") {
    *format = LogFormat::kJson;
  } else {
    return false;
  }
  return true;
}

bool ParseLogLevel(absl::string_view text, LogLevel* level) {
  if (text == "debug") {
    *level = LogLevel::kDebug;
  } else if (text == "info") {
    *level = LogLevel::kInfo;
  } else if (text == "warning") {
    *level = LogLevel::kWarning;
  } else if (text == "error") {
    *level = LogLevel::kError;
  } else {
    return false;
  }
  return true;
}

namespace logging_internal {

LogMessage::LogMessage(LogLevel level, const char* file, int line) : level_(level), line_(line) {
  const char* base = std::strrchr(file, '/');
  file_ = base ? base + 1 : file;
}

LogMessage::~LogMessage() {
  const int64_t now_us = RealClock::Get().NowMicros();
  std::string text;
  if (static_cast<LogFormat>(g_format.load(std::memory_order_relaxed)) == LogFormat::kJson) {
    text = "{\"@timestamp\":\"" + Timestamp(now_us) + "\",\"level\":\"" +
           LevelName(level_) + "\",\"caller\":";
    AppendJsonString(std::string(file_) + ":" + std::to_string(line_), &text);
    text += ",\"@message\":";
    AppendJsonString(stream_.str(), &text);
    text += "}\n";
  } else {
    text = std::string(1, absl::ascii_toupper(LevelName(level_)[0])) + " " + Timestamp(now_us) + " " + file_ + ":" +
           std::to_string(line_) + "] " + stream_.str() + "\n";
  }
  ssize_t unused = ::write(STDERR_FILENO, text.data(), text.size());
  (void)unused;
  if (level_ == LogLevel::kFatal) {
    std::abort();
  }
}

std::string SuppressedNote(uint64_t suppressed) {
  if (suppressed == 0) {
    return std::string();
  }
  return "(" + std::to_string(suppressed) + " similar suppressed) ";
}

bool LogRateLimiter::Admit(uint64_t* suppressed) {
  int64_t now = RealClock::Get().MonotonicMicros();
  int64_t next = next_us_.load(std::memory_order_relaxed);
  if (now >= next &&
      next_us_.compare_exchange_strong(next, now + interval_us_, std::memory_order_relaxed)) {
    *suppressed = suppressed_.exchange(0, std::memory_order_relaxed);
    return true;
  }
  suppressed_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

}  // namespace logging_internal
}  // namespace sluice
