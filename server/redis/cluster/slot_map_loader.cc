#include "server/redis/cluster/slot_map_loader.h"

#include "server/redis/address.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};

timeval TimevalOf(absl::Duration d) {
  int64_t us = std::max<int64_t>(absl::ToInt64Microseconds(d), 1);
  timeval tv;
  tv.tv_sec = static_cast<time_t>(us / 1000000);
  tv.tv_usec = static_cast<suseconds_t>(us % 1000000);
  return tv;
}

absl::StatusOr<RedisReply> Run(redisContext* c, const std::string& address,
                               std::initializer_list<std::string_view> args) {
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (std::string_view arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  std::unique_ptr<redisReply, ReplyDeleter> reply(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lengths.data())));
  if (reply == nullptr) {
    return absl::UnavailableError(absl::StrCat("redis ", address, ": ", c->errstr));
  }
  RedisReply owned = RedisReply::FromHiredis(*reply);
  if (owned.is_error()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "redis ", address, ": ", std::string(*args.begin()), " failed: ", owned.str()));
  }
  return owned;
}

}  // namespace


absl::StatusOr<SlotMap> SlotMapLoader::Load(const std::string& address) const {
  std::string host;
  int port = 0;
  if (absl::Status status = SplitHostPort(address, &host, &port); !status.ok()) {
    return status;
  }
  std::unique_ptr<redisContext, ContextDeleter> c(
      redisConnectWithTimeout(host.c_str(), port, TimevalOf(options_.timeout)));
  if (c == nullptr || c->err != 0) {
    return absl::UnavailableError(absl::StrCat(
        "redis ", address, ": cannot connect: ", c != nullptr ? c->errstr : "out of memory"));
  }
  if (redisSetTimeout(c.get(), TimevalOf(options_.timeout)) != REDIS_OK) {
    return absl::UnavailableError(absl::StrCat("redis ", address, ": cannot set a timeout"));
  }
  if (!options_.password.empty()) {
    absl::StatusOr<RedisReply> auth =
        options_.username.empty()
            ? Run(c.get(), address, {"AUTH", options_.password})
            : Run(c.get(), address, {"AUTH", options_.username, options_.password});
    if (!auth.ok()) {
      return auth.status();
    }
  }
  absl::StatusOr<RedisReply> slots = Run(c.get(), address, {"CLUSTER", "SLOTS"});
  if (!slots.ok()) {
    return slots.status();
  }
  absl::StatusOr<SlotMap> map = SlotMap::FromClusterSlots(*slots, host);
  if (!map.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis ", address, ": ", map.status().message()));
  }
  return map;
}

}  // namespace sluice
