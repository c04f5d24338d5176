// Appends a string as a quoted JSON string literal that is always valid UTF-8: bytes that are
// not part of a well-formed sequence (a tensor name may hold anything) become U+FFFD. Header-only
// so the recording side (in the runtime library) and the hvd-timeline tool share it without
// sharing a library.
#pragma once

#include <cstdio>
#include <string>

#include "timeline/utf8.h"

namespace hvd::detail {

inline void append_json_string(std::string& out, const std::string& text) {
  static const char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  out.push_back('"');
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = bytes[i];
    if (c >= 0x80) {
      const int length = utf8_sequence_length(bytes + i, text.size() - i);
      if (length > 0) {
        out.append(text, i, static_cast<std::size_t>(length));
        i += static_cast<std::size_t>(length);
      } else {
        out += kReplacement;
        ++i;
      }
      continue;
    }
    ++i;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

}  // namespace hvd::detail
