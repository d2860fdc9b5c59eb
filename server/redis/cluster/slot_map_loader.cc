#include "server/redis/cluster/slot_map_loader.h"

#include "server/redis/address.h"

#include <string_view>

#include "absl/strings/str_cat.h"
#include "server/common/log_text.h"
#include "server/redis/sync_client.h"

namespace sluice {

absl::StatusOr<SlotMap> SlotMapLoader::Load(const std::string& address) const {
  std::string host;
  int port = 0;
  if (absl::Status status = SplitHostPort(address, &host, &port); !status.ok()) {
    return status;
  }
  absl::StatusOr<std::unique_ptr<RedisSyncClient>> client = RedisSyncClient::Connect(
      RedisEndpoint{host, port, ""}, options_.tls.get(), options_.timeout);
  if (!client.ok()) {
    return client.status();
  }
  auto run = [&](std::initializer_list<std::string_view> args) -> absl::StatusOr<RedisReply> {
    absl::StatusOr<RedisReply> reply = (*client)->Run(args);
    if (reply.ok() && reply->is_error()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "redis ", address, ": ", std::string(*args.begin()), " failed: ",
          LogText(reply->str())));
    }
    return reply;
  };
  if (absl::Status auth = (*client)->Authenticate(options_.username, options_.password);
      !auth.ok()) {
    return auth;
  }
  absl::StatusOr<RedisReply> slots = run({"CLUSTER", "SLOTS"});
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
