#include "server/redis/command.h"

#include <charconv>
#include <cstring>

namespace sluice {
namespace {

constexpr std::string_view kEvalSha = "EVALSHA";

size_t DecimalDigits(size_t n) {
  size_t digits = 1;
  while (n >= 10) {
    n /= 10;
    ++digits;
  }
  return digits;
}

// Bytes of "<marker><n>\r\n".
size_t HeaderSize(size_t n) { return 1 + DecimalDigits(n) + 2; }

// Bytes of one bulk string "$<len>\r\n<bytes>\r\n".
size_t BulkSize(std::string_view arg) { return HeaderSize(arg.size()) + arg.size() + 2; }

char* WriteHeader(char marker, size_t n, char* p) {
  *p++ = marker;
  p = std::to_chars(p, p + 20, n).ptr;
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

char* WriteBulk(std::string_view arg, char* p) {
  p = WriteHeader('$', arg.size(), p);
  if (!arg.empty()) {
    std::memcpy(p, arg.data(), arg.size());
    p += arg.size();
  }
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

}  // namespace

void AppendRespCommand(absl::Span<const std::string_view> args, std::string* out) {
  // Sized exactly first, so the append is one (amortized) allocation and plain copies.
  size_t size = HeaderSize(args.size());
  for (std::string_view arg : args) {
    size += BulkSize(arg);
  }
  size_t start = out->size();
  out->resize(start + size);
  char* p = out->data() + start;
  p = WriteHeader('*', args.size(), p);
  for (std::string_view arg : args) {
    p = WriteBulk(arg, p);
  }
}

size_t AppendEvalShaCommand(std::string_view sha1, absl::Span<const std::string_view> keys,
                            absl::Span<const std::string_view> args, std::string* out) {
  char numkeys_buffer[24];
  char* numkeys_end =
      std::to_chars(numkeys_buffer, numkeys_buffer + sizeof(numkeys_buffer), keys.size()).ptr;
  std::string_view numkeys(numkeys_buffer, numkeys_end - numkeys_buffer);

  size_t argc = 3 + keys.size() + args.size();
  size_t size = HeaderSize(argc) + BulkSize(kEvalSha) + BulkSize(sha1) + BulkSize(numkeys);
  for (std::string_view key : keys) {
    size += BulkSize(key);
  }
  for (std::string_view arg : args) {
    size += BulkSize(arg);
  }
  size_t start = out->size();
  out->resize(start + size);
  char* p = out->data() + start;
  p = WriteHeader('*', argc, p);
  p = WriteBulk(kEvalSha, p);
  p = WriteBulk(sha1, p);
  p = WriteBulk(numkeys, p);
  size_t first_key = std::string::npos;
  if (!keys.empty()) {
    first_key = static_cast<size_t>(p - out->data()) + HeaderSize(keys[0].size());
  }
  for (std::string_view key : keys) {
    p = WriteBulk(key, p);
  }
  for (std::string_view arg : args) {
    p = WriteBulk(arg, p);
  }
  return first_key;
}

RedisCommand RedisCommand::FromArgs(absl::Span<const std::string_view> args) {
  std::string resp;
  AppendRespCommand(args, &resp);
  return RedisCommand(std::move(resp), nullptr);
}

RedisCommand RedisCommand::EvalSha(const RedisScript& script,
                                   absl::Span<const std::string_view> keys,
                                   absl::Span<const std::string_view> args) {
  std::string resp;
  AppendEvalShaCommand(script.sha1(), keys, args, &resp);
  return RedisCommand(std::move(resp), &script);
}

}  // namespace sluice
