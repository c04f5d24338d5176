// The bytes of one elastic commit file: a header line, "HVDCOMMIT1 id=N size=N bytes=N fnv1a=X",
// then the payload. Reading one checks every header field against the file's real size before
// anything is allocated (Note [What the commit store trusts], commit_store.h). No file I/O here:
// CommitStore reads and writes the files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace hvd::detail {

struct StoredCommit {
  std::int64_t id = 0;
  int world_size = 0;
  std::string payload;
};

// The header line is shorter than this: a reader looks no further for its newline.
constexpr std::size_t kMaxCommitHeader = 160;

struct CommitHeader {
  std::int64_t id = 0;
  int world_size = 0;
  std::uint64_t bytes = 0;
  std::uint64_t sum = 0;
  std::size_t length = 0;  // of the header line, its newline included
};

// The header line of `commit`, its newline included.
std::string commit_header(const StoredCommit& commit);

// Checks every field of the header at the start of `text` (`available` bytes read of a file of
// `file_size` bytes named for commit `id`) before anything else is read or allocated: "" when
// good, else what is wrong.
std::string parse_commit_header(const char* text, std::size_t available, std::uint64_t file_size, std::int64_t id,
                                CommitHeader* header);

// "" when `payload` has the header's checksum, else what is wrong.
std::string checksum_problem(const CommitHeader& header, const std::string& payload);

// Parses one commit file's bytes as the loader does, for a file named for `id`: the commit, or
// nullopt with `problem` saying what is wrong.
std::optional<StoredCommit> parse_commit(const std::string& bytes, std::int64_t id, std::string* problem);

// A whole number of at most `max_digits` decimal digits (no sign, no spaces), or false.
bool parse_digits(const std::string& text, std::size_t max_digits, std::uint64_t* out);

}  // namespace hvd::detail
