// The project's one logging facade (abseil 20220623 has no absl/log). Lines go to stderr as
// "<level> <time> <file>:<line>] message", or with LogFormat::kJson as one JSON object a line:
// {"@timestamp":"<RFC 3339 UTC>","level":"warning","caller":"<file>:<line>","@message":"..."}
// (the field names envoyproxy/ratelimit's LOG_FORMAT=json uses). Safe for concurrent use: each line is written with a
// single write(2) so lines from different threads never interleave.
//
//   SLUICE_LOG(INFO) << "listening on " << address;
//   SLUICE_LOG_EVERY_SECONDS(WARNING, 10) << "redis unreachable: " << status;
#pragma once

#include "absl/strings/string_view.h"
#include <atomic>
#include <cstdint>
#include <sstream>
#include <string>

namespace sluice {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kFatal = 4 };

// Lines below this level are dropped. Default kInfo.
void SetMinLogLevel(LogLevel level);
LogLevel MinLogLevel();
// Parses "debug", "info", "warning", "error"; returns false on anything else.
bool ParseLogLevel(absl::string_view text, LogLevel* level);
// The name ParseLogLevel reads ("fatal" for kFatal, which it does not).
absl::string_view LogLevelName(LogLevel level);

enum class LogFormat { kText, kJson };
// Default kText. Set once at start-up, before threads log.
void SetLogFormat(LogFormat format);
// Parses "text" or "json"; returns false on anything else.
bool ParseLogFormat(absl::string_view text, LogFormat* format);
// The name ParseLogFormat reads.
absl::string_view LogFormatName(LogFormat format);

namespace logging_internal {

// Builds one line and writes it on destruction; kFatal aborts the process after writing.
class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  const char* file_;  // base name
  int line_;
  std::ostringstream stream_;
};

// Admits at most one event per interval across all threads; counts the ones it suppressed.
class LogRateLimiter {
 public:
  explicit LogRateLimiter(int64_t interval_seconds) : interval_us_(interval_seconds * 1000000) {}
  // True if the caller should log now. *suppressed receives how many events were skipped since
  // the last admitted one.
  bool Admit(uint64_t* suppressed);

 private:
  const int64_t interval_us_;
  std::atomic<int64_t> next_us_{0};
  std::atomic<uint64_t> suppressed_{0};
};

// "(N similar suppressed) ", or "" when N is 0.
std::string SuppressedNote(uint64_t suppressed);

struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace logging_internal
}  // namespace sluice

#define SLUICE_LOG_LEVEL_DEBUG ::sluice::LogLevel::kDebug
#define SLUICE_LOG_LEVEL_INFO ::sluice::LogLevel::kInfo
#define SLUICE_LOG_LEVEL_WARNING ::sluice::LogLevel::kWarning
#define SLUICE_LOG_LEVEL_ERROR ::sluice::LogLevel::kError
#define SLUICE_LOG_LEVEL_FATAL ::sluice::LogLevel::kFatal

#define SLUICE_LOG(level)                                                          \
  (SLUICE_LOG_LEVEL_##level < ::sluice::MinLogLevel())                             \
      ? (void)0                                                                    \
      : ::sluice::logging_internal::Voidify() &                                    \
            ::sluice::logging_internal::LogMessage(SLUICE_LOG_LEVEL_##level, __FILE__, \
                                                   __LINE__)                       \
                .stream()

// Logs at most once per `seconds` from this call site; the line says how many were skipped.
#define SLUICE_LOG_EVERY_SECONDS(level, seconds)                                         \
  for (uint64_t sluice_suppressed_ = 0,                                                  \
                sluice_once_ = [&] {                                                     \
                  static ::sluice::logging_internal::LogRateLimiter limiter(seconds);    \
                  return limiter.Admit(&sluice_suppressed_) ? 1u : 0u;                   \
                }();                                                                     \
       sluice_once_ != 0; sluice_once_ = 0)                                              \
  SLUICE_LOG(level) << ::sluice::logging_internal::SuppressedNote(sluice_suppressed_)
