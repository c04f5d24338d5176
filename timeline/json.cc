#include "timeline/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "timeline/json_escape.h"

namespace hvd::timeline {
namespace {
constexpr int kMaxDepth = 256;  // deep enough for any trace, shallow enough for the stack
}

JsonValue JsonValue::boolean(bool value) {
  JsonValue v;
  v.kind_ = Kind::Bool;
  v.bool_ = value;
  return v;
}
JsonValue JsonValue::number(double value) {
  JsonValue v;
  v.kind_ = Kind::Number;
  v.number_ = value;
  return v;
}
JsonValue JsonValue::string(std::string value) {
  JsonValue v;
  v.kind_ = Kind::String;
  v.string_ = std::move(value);
  return v;
}
JsonValue JsonValue::array() {
  JsonValue v;
  v.kind_ = Kind::Array;
  return v;
}
JsonValue JsonValue::object() {
  JsonValue v;
  v.kind_ = Kind::Object;
  return v;
}

const JsonValue* JsonValue::find(const std::string& key) const {
  for (const auto& member : members_) {
    if (member.first == key) return &member.second;
  }
  return nullptr;
}

void JsonValue::set(const std::string& key, JsonValue value) {
  for (auto& member : members_) {
    if (member.first == key) {
      member.second = std::move(value);
      return;
    }
  }
  members_.emplace_back(key, std::move(value));
}

std::string JsonValue::dump() const {
  std::string out;
  dump_to(out);
  return out;
}

void JsonValue::dump_to(std::string& out) const {
  switch (kind_) {
    case Kind::Null:
      out += "null";
      break;
    case Kind::Bool:
      out += bool_ ? "true" : "false";
      break;
    case Kind::Number: {
      char buf[40];
      if (std::isfinite(number_) && number_ == std::floor(number_) && std::fabs(number_) < 1e15) {
        std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(number_));
      } else {
        std::snprintf(buf, sizeof(buf), "%.15g", std::isfinite(number_) ? number_ : 0.0);
      }
      out += buf;
      break;
    }
    case Kind::String:
      detail::append_json_string(out, string_);
      break;
    case Kind::Array:
      out.push_back('[');
      for (std::size_t i = 0; i < items_.size(); ++i) {
        if (i > 0) out.push_back(',');
        items_[i].dump_to(out);
      }
      out.push_back(']');
      break;
    case Kind::Object:
      out.push_back('{');
      for (std::size_t i = 0; i < members_.size(); ++i) {
        if (i > 0) out.push_back(',');
        detail::append_json_string(out, members_[i].first);
        out.push_back(':');
        members_[i].second.dump_to(out);
      }
      out.push_back('}');
      break;
  }
}

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
  for (;;) {
    skip_space();
    if (peek() != '"') fail("expected a member name");
    std::string key = parse_string();
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

std::string JsonParser::parse_string() {
  std::string out;
  advance();  // opening quote
  for (;;) {
    if (at_end()) fail("unterminated string");
    const char c = peek();
    advance();
    if (c == '"') return out;
    if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
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
      case 'u': {
        unsigned code = parse_hex4();
        if (code >= 0xD800 && code < 0xDC00 && peek() == '\\') {  // surrogate pair
          advance();
          if (peek() != 'u') fail("bad surrogate pair");
          advance();
          const unsigned low = parse_hex4();
          code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
        }
        append_utf8(out, code);
        break;
      }
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
  return std::strtod(text_.substr(start, pos_ - start).c_str(), nullptr);
}

JsonValue parse_json(const std::string& text) {
  JsonParser parser(text);
  JsonValue value = parser.parse_value();
  parser.skip_space();
  if (!parser.at_end()) parser.fail("trailing characters after the document");
  return value;
}

}  // namespace hvd::timeline
