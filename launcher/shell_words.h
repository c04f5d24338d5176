// Shell-style words, both ways: splitting a string the user typed (--mpi-args "...") into argv
// words as a POSIX shell would (quotes and backslashes, no expansion), and quoting an argv for
// display (--dry-run, --verbose). hvdrun itself never runs a shell. Main thread only.
#pragma once

#include <string>
#include <vector>

namespace hvd::launcher {

// Splits on blanks outside quotes. '...' keeps everything literally; "..." keeps everything but
// \" \\ \$ \` (a backslash before those is dropped); outside quotes a backslash keeps the next
// character. '' and "" give an empty word. No variable, glob or command expansion.
// Throws hvd::Error "WHAT 'TEXT': unbalanced ..." for an unclosed quote or a trailing backslash.
std::vector<std::string> split_shell_words(const std::string& text, const std::string& what);

// `arg` as a POSIX shell would need it (unchanged when it has only safe characters).
std::string shell_quote(const std::string& arg);
// The argv as one line of shell-quoted words, for reading only.
std::string format_command(const std::vector<std::string>& argv);

}  // namespace hvd::launcher
