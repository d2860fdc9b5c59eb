#include "server/redis/command_batch.h"

#include "server/redis/routing_key.h"

namespace sluice {

void CommandBatch::Reserve(size_t commands, size_t bytes) {
  entries_.reserve(commands);
  buffer_.reserve(bytes);
}

CommandBatch& CommandBatch::Add(absl::Span<const std::string_view> args) {
  size_t start = buffer_.size();
  AppendRespCommand(args, &buffer_);
  Commit(start, nullptr);
  return *this;
}

CommandBatch& CommandBatch::AddEvalSha(const RedisScript& script,
                                       absl::Span<const std::string_view> keys,
                                       absl::Span<const std::string_view> args) {
  size_t start = buffer_.size();
  const size_t key_at = AppendEvalShaCommand(script.sha1(), keys, args, &buffer_);
  CommitWithKey(start, &script, key_at, keys.empty() ? 0 : keys[0].size());
  return *this;
}

CommandBatch& CommandBatch::Add(const RedisCommand& command) {
  return AddFormatted(command.resp(), command.script());
}

CommandBatch& CommandBatch::AddFormatted(std::string_view resp, const RedisScript* script) {
  size_t start = buffer_.size();
  buffer_.append(resp);
  Commit(start, script);
  return *this;
}

CommandBatch& CommandBatch::AddFrom(const CommandBatch& other, size_t i) {
  const Entry& source = other.entries_[i];
  size_t start = buffer_.size();
  buffer_.append(other.buffer_, source.offset, source.length);
  entries_.push_back(
      Entry{start, source.length, source.key_offset, source.key_length, source.script});
  return *this;
}

void CommandBatch::Clear() {
  buffer_.clear();
  entries_.clear();
  traces_.clear();
}

void CommandBatch::Commit(size_t start, const RedisScript* script) {
  size_t length = buffer_.size() - start;
  std::optional<RoutingKeyPosition> key =
      FindRoutingKey(std::string_view(buffer_).substr(start, length));
  entries_.push_back(Entry{start, length, key ? key->offset : 0, key ? key->length : 0, script});
}

void CommandBatch::CommitWithKey(size_t start, const RedisScript* script, size_t key_at,
                                 size_t key_length) {
  const bool keyed = key_at != std::string::npos;
  entries_.push_back(Entry{start, buffer_.size() - start,
                           keyed ? static_cast<uint32_t>(key_at - start) : 0,
                           keyed ? static_cast<uint32_t>(key_length) : 0, script});
}

}  // namespace sluice
