// JsonParser: strict recursive descent over one text.
#include "timeline/json.h"

#include <cmath>
#include <cstdlib>
#include <unordered_set>

#include "timeline/utf8.h"

namespace hvd::timeline {
namespace {
constexpr int kMaxDepth = 256;  // deep enough for any trace, shallow enough for the stack
constexpr std::size_t kLinearKeyCheck = 16;  // members checked for duplicates by a plain scan

bool has_member(const JsonValue::Members& members, const std::string& key) {
  for (const auto& member : members) {
    if (member.first == key) return true;
  }
  return false;
}
}  // namespace

void JsonParser::fail(const std::string& what) const {
  const bool end = at_end();
  throw JsonError((end ? "unexpected end of input" : what) + " at byte " + std::to_string(pos_),
                  pos_, end);
}

void JsonParser::skip_space() {
  while (!at_end() && (peek() == ' ' || peek() == '\n' || peek() == '\r' || peek() == '\t')) {
    ++pos_;
  }
}

JsonValue JsonParser::parse_value() { return parse_any(0); }

JsonValue JsonParser::parse_any(int depth) {
  if (depth > kMaxDepth) fail("nesting too deep");
  skip_space();
  switch (peek()) {
    case '{':
      return parse_object(depth + 1);
    case '[':
      return parse_array(depth + 1);
    case '"':
      return JsonValue::string(parse_string());
    case 't':
      expect_word("true");
      return JsonValue::boolean(true);
    case 'f':
      expect_word("false");
      return JsonValue::boolean(false);
    case 'n':
      expect_word("null");
      return JsonValue();
    default:
      if (peek() == '-' || (peek() >= '0' && peek() <= '9'))
        return JsonValue::number(parse_number());
      fail(std::string("unexpected character '") + peek() + "'");
  }
}

JsonValue JsonParser::parse_object(int depth) {
  JsonValue object = JsonValue::object();
  advance();  // '{'
  skip_space();
  if (peek() == '}') {
    advance();
    return object;
  }
  std::unordered_set<std::string> keys;  // used once the object is large
  for (;;) {
    skip_space();
    if (peek() != '"') fail("expected a member name");
    const std::size_t key_at = pos_;
    std::string key = parse_string();
    const bool duplicate = object.members_.size() < kLinearKeyCheck
                               ? has_member(object.members_, key)
                               : !keys.insert(key).second;
    if (object.members_.size() + 1 == kLinearKeyCheck) {
      for (const auto& member : object.members_) keys.insert(member.first);
      keys.insert(key);
    }
    if (duplicate) {
      pos_ = key_at;
      fail("duplicate member name \"" + key + "\"");
    }
    skip_space();
    if (peek() != ':') fail("expected ':'");
    advance();
    object.members_.emplace_back(std::move(key), parse_any(depth));
    skip_space();
    if (peek() == ',') {
      advance();
    } else if (peek() == '}') {
      advance();
      return object;
    } else {
      fail("expected ',' or '}'");
    }
  }
}

JsonValue JsonParser::parse_array(int depth) {
  JsonValue array = JsonValue::array();
  advance();  // '['
  skip_space();
  if (peek() == ']') {
    advance();
    return array;
  }
  for (;;) {
    array.items_.push_back(parse_any(depth));
    skip_space();
    if (peek() == ',') {
      advance();
    } else if (peek() == ']') {
      advance();
      return array;
    } else {
      fail("expected ',' or ']'");
    }
  }
}

void JsonParser::expect_word(const char* word) {
  for (const char* c = word; *c != '\0'; ++c) {
    if (peek() != *c) fail(std::string("expected '") + word + "'");
    advance();
  }
}

unsigned JsonParser::parse_hex4() {
  unsigned code = 0;
  for (int i = 0; i < 4; ++i) {
    const char c = peek();
    unsigned digit;
    if (c >= '0' && c <= '9')
      digit = static_cast<unsigned>(c - '0');
    else if (c >= 'a' && c <= 'f')
      digit = static_cast<unsigned>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      digit = static_cast<unsigned>(c - 'A' + 10);
    else
      fail("bad \\u escape");
    code = code * 16 + digit;
    advance();
  }
  return code;
}

void JsonParser::append_utf8(std::string& out, unsigned code) {
  if (code < 0x80) {
    out.push_back(static_cast<char>(code));
  } else if (code < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code >> 6)));
    out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else if (code < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
  }
}

void JsonParser::append_raw_utf8(std::string& out) {
  const auto* at = reinterpret_cast<const unsigned char*>(text_.data()) + pos_;
  const int length = detail::utf8_sequence_length(at, text_.size() - pos_);
  if (length == detail::kTruncatedUtf8) {
    pos_ = text_.size();
    fail("unterminated string");
  }
  if (length == detail::kInvalidUtf8) fail("invalid UTF-8 in string");
  out.append(text_, pos_, static_cast<std::size_t>(length));
  pos_ += static_cast<std::size_t>(length);
}

// After "\\u": one code point, from a pair of escapes for a surrogate pair. A lone surrogate
// has no UTF-8 form, so it is an error (Python's json accepts it; Perfetto would mangle it).
unsigned JsonParser::parse_escaped_code_point() {
  const std::size_t start = pos_ - 2;
  const unsigned code = parse_hex4();
  if (code >= 0xDC00 && code <= 0xDFFF) {
    pos_ = start;
    fail("lone low surrogate in \\u escape");
  }
  if (code < 0xD800 || code > 0xDBFF) return code;
  if (peek() != '\\') {
    if (!at_end()) pos_ = start;
    fail("high surrogate without its low half in \\u escape");
  }
  advance();
  if (peek() != 'u') {
    if (!at_end()) pos_ = start;
    fail("high surrogate without its low half in \\u escape");
  }
  advance();
  const unsigned low = parse_hex4();
  if (low < 0xDC00 || low > 0xDFFF) {
    pos_ = start;
    fail("high surrogate without its low half in \\u escape");
  }
  return 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
}

std::string JsonParser::parse_string() {
  std::string out;
  advance();  // opening quote
  for (;;) {
    if (at_end()) fail("unterminated string");
    const char c = peek();
    advance();
    if (c == '"') return out;
    if (static_cast<unsigned char>(c) < 0x20) {
      --pos_;
      fail("control character in string");
    }
    if (static_cast<unsigned char>(c) >= 0x80) {
      --pos_;
      append_raw_utf8(out);
      continue;
    }
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    const char e = peek();
    advance();
    switch (e) {
      case '"':
        out.push_back('"');
        break;
      case '\\':
        out.push_back('\\');
        break;
      case '/':
        out.push_back('/');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'u':
        append_utf8(out, parse_escaped_code_point());
        break;
      default:
        if (at_end()) fail("unterminated string");
        --pos_;
        fail("bad escape in string");
    }
  }
}

double JsonParser::parse_number() {
  const std::size_t start = pos_;
  if (peek() == '-') advance();
  if (!(peek() >= '0' && peek() <= '9')) fail("bad number");
  if (peek() == '0') {
    advance();
    if (peek() >= '0' && peek() <= '9') fail("leading zero in number");
  }
  while (peek() >= '0' && peek() <= '9') advance();
  if (peek() == '.') {
    advance();
    if (!(peek() >= '0' && peek() <= '9')) fail("bad number");
    while (peek() >= '0' && peek() <= '9') advance();
  }
  if (peek() == 'e' || peek() == 'E') {
    advance();
    if (peek() == '+' || peek() == '-') advance();
    if (!(peek() >= '0' && peek() <= '9')) fail("bad number");
    while (peek() >= '0' && peek() <= '9') advance();
  }
  const double value = std::strtod(text_.substr(start, pos_ - start).c_str(), nullptr);
  if (!std::isfinite(value)) {
    const std::size_t end = pos_;
    pos_ = start;
    if (end >= text_.size()) pos_ = end;  // may be cut short: more digits could follow
    fail("number out of range (not a finite double)");
  }
  return value;
}

JsonValue parse_json(const std::string& text) {
  JsonParser parser(text);
  JsonValue value = parser.parse_value();
  parser.skip_space();
  if (!parser.at_end()) parser.fail("trailing characters after the document");
  return value;
}

}  // namespace hvd::timeline
