#include "server/service/json_request_check.h"

#include <array>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sluice {
namespace {

// A duplicate key is shown in its error up to this long.
constexpr size_t kShownKeyBytes = 64;

// Bytes a string holds as they are, needing no second look: printable ASCII but '"' and '\\'.
constexpr std::array<bool, 256> kPlainStringBytes = [] {
  std::array<bool, 256> plain{};
  for (int c = 0x20; c < 0x80; ++c) {
    plain[c] = c != '"' && c != '\\';
  }
  return plain;
}();

bool IsWhitespace(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsDigit(unsigned char c) { return c >= '0' && c <= '9'; }

int HexValue(unsigned char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

// The four hex digits at `text[at]`, or -1. REQUIRES: at + 4 <= text.size().
int32_t Hex4(absl::string_view text, size_t at) {
  int32_t value = 0;
  for (size_t i = 0; i < 4; ++i) {
    const int digit = HexValue(static_cast<unsigned char>(text[at + i]));
    if (digit < 0) {
      return -1;
    }
    value = value * 16 + digit;
  }
  return value;
}

bool IsHighSurrogate(int32_t u) { return u >= 0xD800 && u <= 0xDBFF; }
bool IsLowSurrogate(int32_t u) { return u >= 0xDC00 && u <= 0xDFFF; }

// The bytes of a key's text, unescaped, as protobuf's JSON name writes them (ToJsonName in
// descriptor.cc): '_' dropped and the byte after it upper-cased (ASCII only). A field's original
// name and its JSON name read the same. REQUIRES: `raw` is the inside of a string the checker has
// already accepted, so every escape in it is complete and valid.
class JsonNameReader {
 public:
  explicit JsonNameReader(absl::string_view raw) : raw_(raw) {}

  // The next byte, or -1 at the end.
  int Next() {
    bool capitalize = false;
    for (int c = NextUnescaped(); c >= 0; c = NextUnescaped()) {
      if (c == '_') {
        capitalize = true;
        continue;
      }
      if (capitalize && c >= 'a' && c <= 'z') {
        return c - 'a' + 'A';
      }
      return c;
    }
    return -1;
  }

 private:
  int NextUnescaped() {
    if (pending_next_ < pending_size_) {
      return pending_[pending_next_++];
    }
    if (at_ >= raw_.size()) {
      return -1;
    }
    const unsigned char c = static_cast<unsigned char>(raw_[at_]);
    if (c != '\\') {
      ++at_;
      return c;
    }
    const char kind = raw_[at_ + 1];
    at_ += 2;
    switch (kind) {
      case 'b':
        return '\b';
      case 'f':
        return '\f';
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case 'u':
        break;
      default:  // '"', '\\', '/'
        return static_cast<unsigned char>(kind);
    }
    int32_t code = Hex4(raw_, at_);
    at_ += 4;
    if (IsHighSurrogate(code)) {
      code = 0x10000 + ((code - 0xD800) << 10) + (Hex4(raw_, at_ + 2) - 0xDC00);
      at_ += 6;
    }
    // UTF-8, as protobuf stores the key it unescapes.
    pending_next_ = 0;
    if (code < 0x80) {
      pending_size_ = 0;
      return code;
    }
    if (code < 0x800) {
      pending_[0] = static_cast<unsigned char>(0xC0 | (code >> 6));
      pending_[1] = static_cast<unsigned char>(0x80 | (code & 0x3F));
      pending_size_ = 2;
    } else if (code < 0x10000) {
      pending_[0] = static_cast<unsigned char>(0xE0 | (code >> 12));
      pending_[1] = static_cast<unsigned char>(0x80 | ((code >> 6) & 0x3F));
      pending_[2] = static_cast<unsigned char>(0x80 | (code & 0x3F));
      pending_size_ = 3;
    } else {
      pending_[0] = static_cast<unsigned char>(0xF0 | (code >> 18));
      pending_[1] = static_cast<unsigned char>(0x80 | ((code >> 12) & 0x3F));
      pending_[2] = static_cast<unsigned char>(0x80 | ((code >> 6) & 0x3F));
      pending_[3] = static_cast<unsigned char>(0x80 | (code & 0x3F));
      pending_size_ = 4;
    }
    return pending_[pending_next_++];
  }

  absl::string_view raw_;
  size_t at_ = 0;
  unsigned char pending_[4] = {};
  int pending_size_ = 0;
  int pending_next_ = 0;
};

// FNV-1a over the key's JSON name: keys are compared in full only when their hashes agree.
uint64_t JsonNameHash(absl::string_view raw) {
  uint64_t hash = 14695981039346656037ull;
  JsonNameReader reader(raw);
  for (int c = reader.Next(); c >= 0; c = reader.Next()) {
    hash = (hash ^ static_cast<uint64_t>(c)) * 1099511628211ull;
  }
  return hash;
}

bool SameJsonName(absl::string_view a, absl::string_view b) {
  JsonNameReader ra(a);
  JsonNameReader rb(b);
  while (true) {
    const int ca = ra.Next();
    if (ca != rb.Next()) {
      return false;
    }
    if (ca < 0) {
      return true;
    }
  }
}

// A key as written: valid JSON string contents, so quoting it in a message needs no escaping; a
// long one is cut between characters, never inside an escape or a UTF-8 sequence.
std::string ShownKey(absl::string_view raw) {
  size_t cut = 0;
  while (cut < raw.size()) {
    const unsigned char c = static_cast<unsigned char>(raw[cut]);
    size_t unit = 1;
    if (c == '\\') {
      unit = raw[cut + 1] == 'u' ? 6 : 2;
    } else if (c >= 0xF0) {
      unit = 4;
    } else if (c >= 0xE0) {
      unit = 3;
    } else if (c >= 0xC0) {
      unit = 2;
    }
    if (cut + unit > kShownKeyBytes) {
      return absl::StrCat("\"", raw.substr(0, cut), "...\"");
    }
    cut += unit;
  }
  return absl::StrCat("\"", raw, "\"");
}

class Checker {
 public:
  Checker(absl::string_view body, size_t max_array_elements)
      : in_(body), max_array_elements_(max_array_elements) {}

  absl::Status Run() {
    SkipWhitespace();
    if (AtEnd()) {
      return Fault(pos_, "an empty body", "a RateLimitRequest is a JSON object");
    }
    if (Peek() != '{') {
      return Unexpected("'{': a RateLimitRequest is a JSON object");
    }
    bool want_value = true;  // else: a value just ended
    while (want_value || depth_ > 0) {
      absl::Status status = want_value ? Value(&want_value) : AfterValue(&want_value);
      if (!status.ok()) {
        return status;
      }
    }
    SkipWhitespace();
    return AtEnd() ? absl::OkStatus() : Unexpected("nothing after the request's object");
  }

 private:
  struct Level {
    bool is_object;
    size_t opened_at;
    size_t count;  // elements, or keys
  };
  // A key of an object still open.
  struct Key {
    size_t at;  // its opening quote
    absl::string_view raw;
    uint64_t hash;
  };

  bool AtEnd() const { return pos_ >= in_.size(); }
  unsigned char Peek() const { return static_cast<unsigned char>(in_[pos_]); }

  void SkipWhitespace() {
    while (!AtEnd() && IsWhitespace(Peek())) {
      ++pos_;
    }
  }

  static absl::Status Fault(size_t at, absl::string_view what, absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(what, " at byte ", at, ": ", why));
  }

  // What is at pos_ instead of `expected`.
  absl::Status Unexpected(absl::string_view expected) const {
    if (AtEnd()) {
      return Fault(pos_, "the body ends", absl::StrCat("expected ", expected));
    }
    const unsigned char c = Peek();
    const std::string shown =
        c > 0x20 && c < 0x7F ? absl::StrFormat("'%c'", c) : absl::StrFormat("byte 0x%02X", c);
    return Fault(pos_, absl::StrCat("unexpected ", shown), absl::StrCat("expected ", expected));
  }

  // The value at pos_ (whitespace skipped): a scalar is consumed; a container is opened, up to its
  // first value or its end.
  absl::Status Value(bool* want_value) {
    if (AtEnd()) {
      return Unexpected("a value");
    }
    switch (Peek()) {
      case '{':
      case '[':
        return Open(want_value);
      case '"':
        *want_value = false;
        return String(nullptr);
      case 't':
        *want_value = false;
        return Literal("true");
      case 'f':
        *want_value = false;
        return Literal("false");
      case 'n':
        *want_value = false;
        return Literal("null");
      default:
        if (Peek() == '-' || IsDigit(Peek())) {
          *want_value = false;
          return Number();
        }
        return Unexpected("a value");
    }
  }

  absl::Status Open(bool* want_value) {
    const bool is_object = Peek() == '{';
    if (!is_object && depth_ > 0 && !levels_[depth_ - 1].is_object) {
      return Fault(pos_, "an array inside an array", "RateLimitRequest JSON has no such field");
    }
    if (depth_ == kMaxJsonRequestDepth) {
      return Fault(pos_, "nested too deep",
                   absl::StrCat("at most ", kMaxJsonRequestDepth, " levels"));
    }
    levels_[depth_++] = Level{is_object, pos_, 0};
    ++pos_;
    SkipWhitespace();
    if (!AtEnd() && Peek() == (is_object ? '}' : ']')) {
      ++pos_;
      --depth_;
      *want_value = false;
      return absl::OkStatus();
    }
    *want_value = true;
    return is_object ? Member() : Element();
  }

  // Counts one more element of the innermost array.
  absl::Status Element() {
    Level& level = levels_[depth_ - 1];
    if (++level.count > max_array_elements_) {
      return Fault(level.opened_at,
                   absl::StrCat("an array of more than ", max_array_elements_, " elements"),
                   absl::StrCat("at most ", max_array_elements_,
                                ", the most descriptors or entries a request may have"));
    }
    return absl::OkStatus();
  }

  // A key of the innermost object and its colon, up to its value (whitespace skipped).
  absl::Status Member() {
    if (AtEnd() || Peek() != '"') {
      return Unexpected("a key in double quotes");
    }
    Level& level = levels_[depth_ - 1];
    if (level.count == kMaxJsonObjectMembers) {
      return Fault(level.opened_at,
                   absl::StrCat("an object of more than ", kMaxJsonObjectMembers, " keys"),
                   "no RateLimitRequest object has more than 3 fields");
    }
    Key key;
    key.at = pos_;
    absl::Status status = String(&key.raw);
    if (!status.ok()) {
      return status;
    }
    key.hash = JsonNameHash(key.raw);
    Key* keys = keys_[depth_ - 1];
    for (size_t i = 0; i < level.count; ++i) {
      if (keys[i].hash == key.hash && SameJsonName(keys[i].raw, key.raw)) {
        const std::string first = keys[i].raw == key.raw
                                      ? absl::StrCat("first at byte ", keys[i].at)
                                      : absl::StrCat("the same field as ", ShownKey(keys[i].raw),
                                                     " at byte ", keys[i].at);
        return absl::InvalidArgumentError(absl::StrCat("duplicate key ", ShownKey(key.raw),
                                                       " at byte ", key.at, " (", first, ")"));
      }
    }
    keys[level.count++] = key;
    SkipWhitespace();
    if (AtEnd() || Peek() != ':') {
      return Unexpected("':' after a key");
    }
    ++pos_;
    SkipWhitespace();
    return absl::OkStatus();
  }

  // After a value inside a container: ',' and the next member or element, or the container's close.
  absl::Status AfterValue(bool* want_value) {
    SkipWhitespace();
    const bool is_object = levels_[depth_ - 1].is_object;
    if (!AtEnd() && Peek() == ',') {
      ++pos_;
      SkipWhitespace();
      *want_value = true;
      return is_object ? Member() : Element();
    }
    if (!AtEnd() && Peek() == (is_object ? '}' : ']')) {
      ++pos_;
      --depth_;
      return absl::OkStatus();
    }
    return Unexpected(is_object ? "',' or '}'" : "',' or ']'");
  }

  absl::Status Literal(absl::string_view word) {
    if (in_.substr(pos_, word.size()) != word) {
      return Fault(pos_, "an invalid literal", "expected true, false or null");
    }
    pos_ += word.size();
    return absl::OkStatus();
  }

  // RFC 8259: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  absl::Status Number() {
    const size_t start = pos_;
    const auto digits = [this] {
      const size_t first = pos_;
      while (!AtEnd() && IsDigit(Peek())) {
        ++pos_;
      }
      return pos_ > first;
    };
    if (Peek() == '-') {
      ++pos_;
    }
    if (!AtEnd() && Peek() == '0') {
      ++pos_;
      if (!AtEnd() && IsDigit(Peek())) {
        return Fault(start, "an invalid number", "no leading zeros");
      }
    } else if (!digits()) {
      return Fault(start, "an invalid number", "a digit must follow '-'");
    }
    if (!AtEnd() && Peek() == '.') {
      ++pos_;
      if (!digits()) {
        return Fault(start, "an invalid number", "a digit must follow '.'");
      }
    }
    if (!AtEnd() && (Peek() == 'e' || Peek() == 'E')) {
      ++pos_;
      if (!AtEnd() && (Peek() == '+' || Peek() == '-')) {
        ++pos_;
      }
      if (!digits()) {
        return Fault(start, "an invalid number", "a digit must follow the exponent's 'e'");
      }
    }
    return absl::OkStatus();
  }

  // The string whose opening quote is at pos_; its inside (still escaped) into `raw` if given.
  absl::Status String(absl::string_view* raw) {
    const size_t start = pos_++;
    while (true) {
      // Plain ASCII, the bulk of any request, in a tight loop.
      const char* p = in_.data() + pos_;
      const char* const end = in_.data() + in_.size();
      while (p != end && kPlainStringBytes[static_cast<unsigned char>(*p)]) {
        ++p;
      }
      pos_ = static_cast<size_t>(p - in_.data());
      if (AtEnd()) {
        return Fault(start, "an unterminated string", "no closing '\"'");
      }
      const unsigned char c = Peek();
      if (c == '"') {
        if (raw != nullptr) {
          *raw = in_.substr(start + 1, pos_ - start - 1);
        }
        ++pos_;
        return absl::OkStatus();
      }
      absl::Status status = c == '\\' ? Escape() : c < 0x20 ? ControlCharacter() : Utf8();
      if (!status.ok()) {
        return status;
      }
    }
  }

  absl::Status ControlCharacter() const {
    return Fault(pos_, absl::StrFormat("a raw control character 0x%02X in a string", Peek()),
                 "JSON strings must escape it");
  }

  // The escape whose backslash is at pos_.
  absl::Status Escape() {
    const size_t start = pos_;
    if (pos_ + 1 >= in_.size()) {
      return Fault(start, "an unterminated string", "it ends in a '\\'");
    }
    const char kind = in_[pos_ + 1];
    switch (kind) {
      case '"':
      case '\\':
      case '/':
      case 'b':
      case 'f':
      case 'n':
      case 'r':
      case 't':
        pos_ += 2;
        return absl::OkStatus();
      case 'u':
        break;
      default: {
        const unsigned char k = static_cast<unsigned char>(kind);
        return Fault(start,
                     k > 0x20 && k < 0x7F ? absl::StrFormat("an invalid escape '\\%c'", k)
                                          : std::string("an invalid escape"),
                     "JSON has \\\" \\\\ \\/ \\b \\f \\n \\r \\t and \\uXXXX");
      }
    }
    const int32_t code = pos_ + 6 <= in_.size() ? Hex4(in_, pos_ + 2) : -1;
    if (code < 0) {
      return Fault(start, "an invalid \\u escape", "expected four hex digits");
    }
    pos_ += 6;
    if (IsHighSurrogate(code)) {
      const int32_t low = pos_ + 6 <= in_.size() && in_[pos_] == '\\' && in_[pos_ + 1] == 'u'
                              ? Hex4(in_, pos_ + 2)
                              : -1;
      if (IsLowSurrogate(low)) {
        pos_ += 6;
        return absl::OkStatus();
      }
    }
    if (IsHighSurrogate(code) || IsLowSurrogate(code)) {
      return Fault(start, absl::StrFormat("a lone surrogate \\u%04X", code),
                   "not a Unicode character");
    }
    return absl::OkStatus();
  }

  // The multi-byte UTF-8 sequence at pos_ (Unicode's table 3-7: no overlong forms, no surrogates,
  // nothing above U+10FFFF).
  absl::Status Utf8() {
    const unsigned char c = Peek();
    size_t length = 0;
    unsigned char low = 0x80;  // the second byte's range; later bytes are 80..BF
    unsigned char high = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3;
      low = c == 0xE0 ? 0xA0 : 0x80;
      high = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4;
      low = c == 0xF0 ? 0x90 : 0x80;
      high = c == 0xF4 ? 0x8F : 0xBF;
    }
    bool valid = length > 0 && pos_ + length <= in_.size();
    for (size_t i = 1; valid && i < length; ++i) {
      const unsigned char b = static_cast<unsigned char>(in_[pos_ + i]);
      valid = i == 1 ? b >= low && b <= high : b >= 0x80 && b <= 0xBF;
    }
    if (!valid) {
      return Fault(pos_, "invalid UTF-8", "RateLimitRequest strings must be UTF-8");
    }
    pos_ += length;
    return absl::OkStatus();
  }

  const absl::string_view in_;
  const size_t max_array_elements_;
  size_t pos_ = 0;
  int depth_ = 0;
  Level levels_[kMaxJsonRequestDepth];
  // The keys of each open object, by level (unused for arrays).
  Key keys_[kMaxJsonRequestDepth][kMaxJsonObjectMembers];
};

}  // namespace

absl::Status CheckRateLimitRequestJson(absl::string_view body, size_t max_array_elements) {
  return Checker(body, max_array_elements).Run();
}

}  // namespace sluice
