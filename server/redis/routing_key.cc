#include "server/redis/routing_key.h"

#include <array>
#include <cctype>
#include <charconv>

namespace sluice {
namespace {

// How a command names the key it is routed by.
enum class KeyRule { kFirstArgument, kSecondArgument, kNumKeys, kNone };

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(a[i])) != b[i]) {
      return false;
    }
  }
  return true;
}

struct CommandRule {
  std::string_view name;  // upper case
  KeyRule rule;
};

constexpr std::array kRules = {
    CommandRule{"EVALSHA", KeyRule::kNumKeys},
    CommandRule{"EVAL", KeyRule::kNumKeys},
    CommandRule{"EVALSHA_RO", KeyRule::kNumKeys},
    CommandRule{"EVAL_RO", KeyRule::kNumKeys},
    CommandRule{"FCALL", KeyRule::kNumKeys},
    CommandRule{"FCALL_RO", KeyRule::kNumKeys},
    CommandRule{"OBJECT", KeyRule::kSecondArgument},
    CommandRule{"MEMORY", KeyRule::kSecondArgument},
    CommandRule{"XINFO", KeyRule::kSecondArgument},
    CommandRule{"XGROUP", KeyRule::kSecondArgument},
    CommandRule{"BITOP", KeyRule::kSecondArgument},
    CommandRule{"PING", KeyRule::kNone},
    CommandRule{"ECHO", KeyRule::kNone},
    CommandRule{"TIME", KeyRule::kNone},
    CommandRule{"INFO", KeyRule::kNone},
    CommandRule{"ASKING", KeyRule::kNone},
    CommandRule{"READONLY", KeyRule::kNone},
    CommandRule{"READWRITE", KeyRule::kNone},
    CommandRule{"SCRIPT", KeyRule::kNone},
    CommandRule{"CLUSTER", KeyRule::kNone},
    CommandRule{"CONFIG", KeyRule::kNone},
    CommandRule{"DBSIZE", KeyRule::kNone},
    CommandRule{"FLUSHALL", KeyRule::kNone},
    CommandRule{"FLUSHDB", KeyRule::kNone},
    CommandRule{"CLIENT", KeyRule::kNone},
    CommandRule{"COMMAND", KeyRule::kNone},
    CommandRule{"AUTH", KeyRule::kNone},
    CommandRule{"HELLO", KeyRule::kNone},
    CommandRule{"SELECT", KeyRule::kNone},
    CommandRule{"QUIT", KeyRule::kNone},
    CommandRule{"RANDOMKEY", KeyRule::kNone},
    CommandRule{"FUNCTION", KeyRule::kNone},
    CommandRule{"LASTSAVE", KeyRule::kNone},
    CommandRule{"SAVE", KeyRule::kNone},
    CommandRule{"BGSAVE", KeyRule::kNone},
    CommandRule{"BGREWRITEAOF", KeyRule::kNone},
    CommandRule{"MULTI", KeyRule::kNone},
    CommandRule{"EXEC", KeyRule::kNone},
    CommandRule{"DISCARD", KeyRule::kNone},
    CommandRule{"UNWATCH", KeyRule::kNone},
    CommandRule{"WAIT", KeyRule::kNone},
    CommandRule{"ROLE", KeyRule::kNone},
    CommandRule{"SLOWLOG", KeyRule::kNone},
    CommandRule{"LATENCY", KeyRule::kNone},
    CommandRule{"ACL", KeyRule::kNone},
    CommandRule{"DEBUG", KeyRule::kNone},
    CommandRule{"SHUTDOWN", KeyRule::kNone},
    CommandRule{"MONITOR", KeyRule::kNone},
    CommandRule{"KEYS", KeyRule::kNone},
    CommandRule{"SCAN", KeyRule::kNone},
    CommandRule{"PUBLISH", KeyRule::kNone},
    CommandRule{"PUBSUB", KeyRule::kNone},
    CommandRule{"SUBSCRIBE", KeyRule::kNone},
    CommandRule{"PSUBSCRIBE", KeyRule::kNone},
    CommandRule{"UNSUBSCRIBE", KeyRule::kNone},
    CommandRule{"PUNSUBSCRIBE", KeyRule::kNone},
    CommandRule{"SWAPDB", KeyRule::kNone},
    CommandRule{"MODULE", KeyRule::kNone},
    CommandRule{"REPLICAOF", KeyRule::kNone},
    CommandRule{"SLAVEOF", KeyRule::kNone},
    CommandRule{"FAILOVER", KeyRule::kNone},
    CommandRule{"RESET", KeyRule::kNone},
    CommandRule{"MIGRATE", KeyRule::kNone},
    CommandRule{"LOLWUT", KeyRule::kNone},
};

KeyRule RuleFor(std::string_view name) {
  for (const CommandRule& rule : kRules) {
    if (EqualsIgnoreCase(name, rule.name)) {
      return rule.rule;
    }
  }
  return KeyRule::kFirstArgument;
}

// Reads "<digits>\r\n" at *pos; advances past it.
bool ReadLength(std::string_view resp, size_t* pos, int64_t* value) {
  size_t end = resp.find("\r\n", *pos);
  if (end == std::string_view::npos || end == *pos) {
    return false;
  }
  auto [ptr, error] = std::from_chars(resp.data() + *pos, resp.data() + end, *value);
  if (error != std::errc() || ptr != resp.data() + end || *value < 0) {
    return false;
  }
  *pos = end + 2;
  return true;
}

}  // namespace

std::optional<RoutingKeyPosition> FindRoutingKey(std::string_view resp) {
  // Only the first four arguments can matter: name, and the key at index 1, 2 or 3.
  constexpr size_t kWanted = 4;
  std::array<RoutingKeyPosition, kWanted> args{};
  size_t pos = 0;
  int64_t count = 0;
  if (resp.empty() || resp[0] != '*') {
    return std::nullopt;
  }
  pos = 1;
  if (!ReadLength(resp, &pos, &count) || count < 1) {
    return std::nullopt;
  }
  size_t parsed = 0;
  for (; parsed < kWanted && parsed < static_cast<size_t>(count); ++parsed) {
    int64_t length = 0;
    if (pos >= resp.size() || resp[pos] != '$') {
      return std::nullopt;
    }
    ++pos;
    if (!ReadLength(resp, &pos, &length) || pos + static_cast<size_t>(length) + 2 > resp.size()) {
      return std::nullopt;
    }
    args[parsed] = {static_cast<uint32_t>(pos), static_cast<uint32_t>(length)};
    pos += static_cast<size_t>(length) + 2;
  }
  auto view = [&](size_t i) { return resp.substr(args[i].offset, args[i].length); };
  switch (RuleFor(view(0))) {
    case KeyRule::kFirstArgument:
      return parsed > 1 ? std::optional(args[1]) : std::nullopt;
    case KeyRule::kSecondArgument:
      return parsed > 2 ? std::optional(args[2]) : std::nullopt;
    case KeyRule::kNumKeys: {
      if (parsed < 4) {
        return std::nullopt;
      }
      std::string_view numkeys = view(2);
      int64_t n = 0;
      auto [ptr, error] = std::from_chars(numkeys.data(), numkeys.data() + numkeys.size(), n);
      if (error != std::errc() || ptr != numkeys.data() + numkeys.size() || n < 1) {
        return std::nullopt;
      }
      return args[3];
    }
    case KeyRule::kNone:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace sluice
