// Where a Sentinel-managed Redis is found: the sentinels to ask and the master's name. A plain
// value; RedisClient (sentinel.h) asks the sentinels for the master and follows its failovers.
#pragma once

#include <string>
#include <vector>

namespace sluice {

struct RedisSentinelOptions {
  // "host:port" of each sentinel; empty: no Sentinel (the client's address is the server).
  std::vector<std::string> addresses{};
  // The master's name as the sentinels know it (`sentinel monitor <name> ...`).
  std::string master{};
  // AUTH for the sentinels (not for the master: that is the client's own username/password).
  std::string username{};
  std::string password{};
};

}  // namespace sluice
