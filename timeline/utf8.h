// Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF), shared
// by the recorder (which replaces bad bytes in tensor names) and the tool's JSON parser (which
// rejects them). Header-only, like json_escape.h; no state.
#pragma once

#include <cstddef>

namespace hvd::detail {

// The outcome of reading one UTF-8 sequence: its length (1 to 4), kInvalidUtf8, or
// kTruncatedUtf8 when the bytes so far are a valid start but the text ends first.
constexpr int kInvalidUtf8 = 0;
constexpr int kTruncatedUtf8 = -1;

inline int utf8_sequence_length(const unsigned char* text, std::size_t available) {
  const unsigned lead = text[0];
  if (lead < 0x80) return 1;
  int length = 0;
  unsigned low = 0x80, high = 0xBF;  // the range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // overlong
    if (lead == 0xED) high = 0x9F;  // UTF-16 surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // overlong
    if (lead == 0xF4) high = 0x8F;  // above U+10FFFF
  } else {
    return kInvalidUtf8;  // a continuation byte, C0/C1 or F5..FF
  }
  for (int i = 1; i < length; ++i) {
    if (static_cast<std::size_t>(i) >= available) return kTruncatedUtf8;
    const unsigned byte = text[i];
    if (byte < (i == 1 ? low : 0x80) || byte > (i == 1 ? high : 0xBF)) return kInvalidUtf8;
  }
  return length;
}

}  // namespace hvd::detail
