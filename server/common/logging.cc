#include "absl/strings/string_view.h"
#include "server/common/logging.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include "server/common/clock.h"

namespace sluice {
namespace {

std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "D";
    case LogLevel::kInfo:
      return "I";
    case LogLevel::kWarning:
      return "W";
    case LogLevel::kError:
      return "E";
    case LogLevel::kFatal:
      return "F";
  }
  return "?";
}

}  // namespace

void SetMinLogLevel(LogLevel level) { g_min_level.store(static_cast<int>(level)); }

LogLevel MinLogLevel() { return static_cast<LogLevel>(g_min_level.load(std::memory_order_relaxed)); }

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

LogMessage::LogMessage(LogLevel level, const char* file, int line) : level_(level) {
  const char* base = std::strrchr(file, '/');
  int64_t now_us = RealClock::Get().NowMicros();
  time_t secs = static_cast<time_t>(now_us / 1000000);
  tm parts;
  gmtime_r(&secs, &parts);
  char when[32];
  std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &parts);
  char micros[16];
  std::snprintf(micros, sizeof(micros), ".%06lldZ", static_cast<long long>(now_us % 1000000));
  stream_ << LevelName(level) << ' ' << when << micros << ' ' << (base ? base + 1 : file) << ':'
          << line << "] ";
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  std::string text = stream_.str();
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
