#include "shell_words.h"

#include <algorithm>
#include <cctype>

#include "horovodcpp/horovod.h"

namespace hvd::launcher {
namespace {

bool blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Reads one shell word of `text` from `*i` (not at a blank) into `*word`. Returns "" or what
// was unbalanced.
std::string read_word(const std::string& text, std::size_t* i, std::string* word) {
  char quote = 0;  // the open quote, or 0
  for (; *i < text.size(); ++*i) {
    const char c = text[*i];
    if (quote == '\'') {
      if (c == '\'') quote = 0;
      else *word += c;
    } else if (c == '\\') {
      if (*i + 1 >= text.size()) return "a trailing backslash";
      const char next = text[++*i];
      if (quote == '"' && std::string("\"\\$`").find(next) == std::string::npos) *word += c;
      *word += next;
    } else if (quote == '"') {
      if (c == '"') quote = 0;
      else *word += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (blank(c)) {
      break;
    } else {
      *word += c;
    }
  }
  if (quote == '\'') return "an unclosed single quote (')";
  if (quote == '"') return "an unclosed double quote (\")";
  return {};
}

}  // namespace

std::vector<std::string> split_shell_words(const std::string& text, const std::string& what) {
  std::vector<std::string> words;
  std::size_t i = 0;
  while (true) {
    while (i < text.size() && blank(text[i])) ++i;
    if (i >= text.size()) return words;
    std::string word;
    const std::string problem = read_word(text, &i, &word);
    if (!problem.empty())
      throw hvd::Error(what + " '" + text + "': " + problem +
                       " (quote words as in a shell: 'a b', \"a b\" or a\\ b)");
    words.push_back(word);
  }
}

std::string shell_quote(const std::string& arg) {
  const bool safe = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](unsigned char c) {
    return std::isalnum(c) || std::string("@%_+=:,./-").find(static_cast<char>(c)) !=
                                  std::string::npos;
  });
  if (safe) return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string format_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) out += (out.empty() ? "" : " ") + shell_quote(a);
  return out;
}

}  // namespace hvd::launcher
