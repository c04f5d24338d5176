#include "elastic/commit_file.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace hvd::detail {
namespace {

constexpr const char* kMagic = "HVDCOMMIT1";

std::uint64_t fnv1a(const char* bytes, std::size_t size) {
  std::uint64_t h = 1469598103934665603ULL;
  for (std::size_t i = 0; i < size; ++i) h = (h ^ static_cast<unsigned char>(bytes[i])) * 1099511628211ULL;
  return h;
}

// At most 40 characters of a header field as a message may show them (damaged files hold anything).
std::string shown(const std::string& text) {
  std::string out;
  for (char c : text.substr(0, 40)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return text.size() > 40 ? out + "..." : out;
}

}  // namespace

std::string commit_header(const StoredCommit& c) {
  char line[kMaxCommitHeader];
  std::snprintf(line, sizeof line, "%s id=%" PRId64 " size=%d bytes=%zu fnv1a=%016" PRIx64 "\n", kMagic, c.id,
                c.world_size, c.payload.size(), fnv1a(c.payload.data(), c.payload.size()));
  return line;
}

bool parse_digits(const std::string& text, std::size_t max_digits, std::uint64_t* out) {
  if (text.empty() || text.size() > max_digits || text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  *out = std::strtoull(text.c_str(), nullptr, 10);
  return true;
}

std::string parse_commit_header(const char* text, std::size_t available, std::uint64_t file_size, std::int64_t id,
                                CommitHeader* h) {
  const std::size_t scan = std::min(available, kMaxCommitHeader);
  const char* newline = static_cast<const char*>(std::memchr(text, '\n', scan));
  if (newline == nullptr)
    return file_size < kMaxCommitHeader
               ? "truncated: the file (" + std::to_string(file_size) + " bytes) ends inside its header"
               : "no header line in its first " + std::to_string(kMaxCommitHeader) + " bytes";
  h->length = static_cast<std::size_t>(newline - text) + 1;
  std::vector<std::string> words;
  std::string word;
  for (const char* p = text; p < newline; ++p) {
    if (*p == ' ') {
      words.push_back(word);
      word.clear();
    } else {
      word += *p;
    }
  }
  words.push_back(word);
  if (words.size() != 5 || words[0] != kMagic)
    return "not a commit header (expected '" + std::string(kMagic) + " id=N size=N bytes=N fnv1a=X')";
  auto field = [&](std::size_t i, const char* key, std::string* value) {
    const std::string prefix = std::string(key) + "=";
    if (words[i].compare(0, prefix.size(), prefix) != 0) return false;
    *value = words[i].substr(prefix.size());
    return true;
  };
  std::string id_text, size_text, bytes_text, sum_text;
  if (!field(1, "id", &id_text) || !field(2, "size", &size_text) || !field(3, "bytes", &bytes_text) ||
      !field(4, "fnv1a", &sum_text))
    return "not a commit header (expected '" + std::string(kMagic) + " id=N size=N bytes=N fnv1a=X')";
  std::uint64_t v = 0;
  if (!parse_digits(id_text, 18, &v) || static_cast<std::int64_t>(v) != id)
    return "id=" + shown(id_text) + " but the file is named for commit " + std::to_string(id);
  h->id = id;
  if (!parse_digits(size_text, 10, &v) || v < 1 || v > 0x7fffffffULL)
    return "size=" + shown(size_text) + " is not a world size (a whole number from 1 to 2^31-1)";
  h->world_size = static_cast<int>(v);
  if (h->length > file_size) return "the file changed while it was read";
  if (!parse_digits(bytes_text, 19, &h->bytes) || h->bytes != file_size - h->length)
    return "bytes=" + shown(bytes_text) + " but the file holds " + std::to_string(file_size - h->length) +
           " bytes after its header";
  if (sum_text.size() != 16 || sum_text.find_first_not_of("0123456789abcdef") != std::string::npos)
    return "fnv1a=" + shown(sum_text) + " is not a 16-digit hexadecimal checksum";
  h->sum = std::strtoull(sum_text.c_str(), nullptr, 16);
  return {};
}

std::string checksum_problem(const CommitHeader& h, const std::string& payload) {
  if (fnv1a(payload.data(), payload.size()) == h.sum) return {};
  return "its checksum does not match its contents";
}

std::optional<StoredCommit> parse_commit(const std::string& bytes, std::int64_t id, std::string* problem) {
  CommitHeader h;
  std::string why = parse_commit_header(bytes.data(), bytes.size(), bytes.size(), id, &h);
  StoredCommit c;
  if (why.empty()) {
    c.payload = bytes.substr(h.length);
    why = checksum_problem(h, c.payload);
  }
  if (!why.empty()) {
    if (problem != nullptr) *problem = why;
    return std::nullopt;
  }
  c.id = h.id;
  c.world_size = h.world_size;
  return c;
}

}  // namespace hvd::detail
