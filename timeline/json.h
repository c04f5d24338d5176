// A small JSON document model and a strict parser for the hvd-timeline tool (no JSON library is
// installed): RFC 8259 plus what Chrome and Perfetto rely on, i.e. it also rejects duplicate
// member names, invalid UTF-8 (lone surrogates included) and numbers that are not finite
// doubles. Objects keep their key order. Used on the tool's one thread.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace hvd::timeline {

class JsonValue {
 public:
  enum class Kind { Null, Bool, Number, String, Array, Object };
  using Members = std::vector<std::pair<std::string, JsonValue>>;

  JsonValue() = default;
  static JsonValue boolean(bool value);
  static JsonValue number(double value);
  static JsonValue string(std::string value);
  static JsonValue array();
  static JsonValue object();

  Kind kind() const { return kind_; }
  bool is_number() const { return kind_ == Kind::Number; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_object() const { return kind_ == Kind::Object; }
  double as_number() const { return number_; }
  bool as_bool() const { return bool_; }
  const std::string& as_string() const { return string_; }
  const std::vector<JsonValue>& items() const { return items_; }
  const Members& members() const { return members_; }
  Members& members() { return members_; }

  // Object member lookup; nullptr when absent (or when this is not an object).
  const JsonValue* find(const std::string& key) const;
  // Sets (replaces or appends) an object member.
  void set(const std::string& key, JsonValue value);
  void push_back(JsonValue value) { items_.push_back(std::move(value)); }

  // Compact JSON text; numbers print without a fraction when they are whole.
  std::string dump() const;
  void dump_to(std::string& out) const;

 private:
  friend class JsonParser;
  Kind kind_ = Kind::Null;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<JsonValue> items_;
  Members members_;
};

// Thrown for malformed text. `at_end` says the text simply stopped (a cut-short file).
class JsonError : public std::runtime_error {
 public:
  JsonError(const std::string& what, std::size_t offset, bool at_end)
      : std::runtime_error(what), offset_(offset), at_end_(at_end) {}
  std::size_t offset() const { return offset_; }
  bool at_end() const { return at_end_; }

 private:
  std::size_t offset_;
  bool at_end_;
};

// Recursive-descent parser over one text; parse_value() reads one value from the position.
class JsonParser {
 public:
  explicit JsonParser(const std::string& text) : text_(text) {}
  JsonValue parse_value();
  void skip_space();
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  void advance() { ++pos_; }
  std::size_t position() const { return pos_; }
  [[noreturn]] void fail(const std::string& what) const;

 private:
  JsonValue parse_object(int depth);
  JsonValue parse_array(int depth);
  JsonValue parse_any(int depth);
  std::string parse_string();
  double parse_number();
  void expect_word(const char* word);
  void append_utf8(std::string& out, unsigned code);
  void append_raw_utf8(std::string& out);  // one validated sequence from the text
  unsigned parse_escaped_code_point();
  unsigned parse_hex4();

  const std::string& text_;
  std::size_t pos_ = 0;
};

// Parses a whole document; throws JsonError.
JsonValue parse_json(const std::string& text);

}  // namespace hvd::timeline
