// JsonValue: the document model and its compact text form.
#include "timeline/json.h"

#include <cmath>
#include <cstdio>

#include "timeline/json_escape.h"

namespace hvd::timeline {

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

}  // namespace hvd::timeline
