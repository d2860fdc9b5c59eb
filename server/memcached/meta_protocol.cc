#include "server/memcached/meta_protocol.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/common/log_text.h"

namespace sluice {

bool IsLegalMemcachedKey(absl::string_view key) {
  if (key.empty() || key.size() > kMemcachedMaxKeyBytes) {
    return false;
  }
  for (char c : key) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u <= ' ' || u == 0x7f) {
      return false;
    }
  }
  return true;
}

int64_t MemcachedExpiry(int64_t ttl_s, int64_t now_s) {
  if (ttl_s < 1) {
    ttl_s = 1;
  }
  return ttl_s > kMemcachedMaxRelativeTtl ? now_s + ttl_s : ttl_s;
}

void AppendIncrementOrCreate(absl::string_view key, uint64_t hits, int64_t expiry,
                             std::string* out) {
  absl::StrAppend(out, "ma ", key, " N", expiry, " J", hits, " D", hits, " v\r\n");
}

void AppendDecrement(absl::string_view key, uint64_t hits, std::string* out) {
  absl::StrAppend(out, "ma ", key, " MD D", hits, " v\r\n");
}

void AppendGetValue(absl::string_view key, std::string* out) {
  absl::StrAppend(out, "mg ", key, " v\r\n");
}

void AppendGetValueAndTtl(absl::string_view key, std::string* out) {
  absl::StrAppend(out, "mg ", key, " v t\r\n");
}

void AppendDelete(absl::string_view key, std::string* out) {
  absl::StrAppend(out, "md ", key, "\r\n");
}

void AppendNoOp(std::string* out) { out->append("mn\r\n"); }

MetaReplyReader::Result MetaReplyReader::Next(MetaReply* reply) {
  if (!error_.empty()) {
    return Result::kError;
  }
  const absl::string_view pending = absl::string_view(buffer_).substr(read_);
  const size_t eol = pending.find("\r\n");
  if (eol == absl::string_view::npos) {
    // A last '\r' may be the line's end whose '\n' has not come: a longest line cut there is
    // no longer than it is whole.
    const size_t line_bytes = pending.size() - (absl::EndsWith(pending, "\r") ? 1 : 0);
    if (line_bytes > kMaxLineBytes) {
      error_ = "a reply line longer than 1024 bytes";
      return Result::kError;
    }
    if (read_ > 0 && read_ == buffer_.size()) {
      buffer_.clear();
      read_ = 0;
    }
    return Result::kNone;
  }
  if (eol > kMaxLineBytes) {
    error_ = "a reply line longer than 1024 bytes";
    return Result::kError;
  }
  const absl::string_view line = pending.substr(0, eol);
  size_t consumed = eol + 2;
  *reply = MetaReply();
  const absl::string_view code = line.substr(0, line.find(' '));
  if (code == "VA") {
    // "VA <size> <flags>*": the size is the first word after the code.
    absl::string_view rest = line.substr(code.size());
    rest.remove_prefix(std::min(rest.find_first_not_of(' '), rest.size()));
    const absl::string_view size_text = rest.substr(0, rest.find(' '));
    size_t size = 0;
    if (size_text.empty() || !absl::SimpleAtoi(size_text, &size) || size > kMaxValueBytes) {
      error_ = absl::StrCat("a value reply memcached does not send: ", LogText(line));
      return Result::kError;
    }
    // The flags after the size: "t<seconds>" answers `mg ... t`; the others are not asked for.
    std::optional<int64_t> ttl_seconds;
    for (absl::string_view flag : absl::StrSplit(rest.substr(size_text.size()), ' ',
                                                  absl::SkipEmpty())) {
      int64_t seconds = 0;
      if (flag.size() > 1 && flag[0] == 't' && absl::SimpleAtoi(flag.substr(1), &seconds)) {
        ttl_seconds = seconds;
      }
    }
    if (pending.size() < consumed + size + 2) {
      return Result::kNone;  // the data has not all come
    }
    const absl::string_view data = pending.substr(consumed, size);
    if (pending.substr(consumed + size, 2) != "\r\n") {
      error_ = "a value not ended by CRLF";
      return Result::kError;
    }
    consumed += size + 2;
    reply->kind = MetaReply::Kind::kValue;
    reply->ttl_seconds = ttl_seconds;
    // A decrement keeps the value's length and pads it with spaces ("0 ").
    reply->numeric = size <= 24 && absl::SimpleAtoi(absl::StripAsciiWhitespace(data),
                                                    &reply->value);
    if (!reply->numeric) {
      reply->value = 0;
    }
  } else if (code == "NF" || code == "EN") {
    reply->kind = MetaReply::Kind::kNotFound;
  } else if (code == "HD" || code == "NS" || code == "EX" || code == "MN") {
    reply->kind = MetaReply::Kind::kOther;
  } else if (code == "ERROR" || code == "CLIENT_ERROR" || code == "SERVER_ERROR") {
    reply->kind = MetaReply::Kind::kError;
    reply->error = LogText(line);
  } else {
    error_ = absl::StrCat("a reply memcached does not send: ", LogText(line));
    return Result::kError;
  }
  read_ += consumed;
  if (read_ == buffer_.size()) {
    buffer_.clear();
    read_ = 0;
  } else if (read_ > 64 * 1024) {
    buffer_.erase(0, read_);
    read_ = 0;
  }
  return Result::kReply;
}

}  // namespace sluice
