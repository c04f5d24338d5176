// Splitting --mpi-args into words as a POSIX shell would, and quoting an argv for display.
#include <catch2/catch.hpp>

#include "horovodcpp/horovod.h"
#include "shell_words.h"

using hvd::launcher::format_command;
using hvd::launcher::shell_quote;
using hvd::launcher::split_shell_words;
using Args = std::vector<std::string>;

namespace {

Args split(const std::string& text) { return split_shell_words(text, "--mpi-args"); }

std::string split_error(const std::string& text) {
  try {
    split(text);
  } catch (const hvd::Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("blanks separate words; quotes and backslashes keep them together") {
  CHECK(split("").empty());
  CHECK(split(" \t ").empty());
  CHECK(split("  --mca btl tcp,self\t-report-bindings ") ==
        Args{"--mca", "btl", "tcp,self", "-report-bindings"});
  CHECK(split("-x 'A=b c' \"d e\" f\\ g") == Args{"-x", "A=b c", "d e", "f g"});
  CHECK(split("pre'in side'post") == Args{"prein sidepost"});
  CHECK(split("'' \"\"") == Args{"", ""});
}

TEST_CASE("single quotes are literal; double quotes keep backslash only before \" \\ $ `") {
  CHECK(split(R"('a\b "c"')") == Args{R"(a\b "c")"});
  CHECK(split(R"("a\"b" "c\\d" "e\$f" "g\h")") == Args{"a\"b", "c\\d", "e$f", "g\\h"});
  CHECK(split(R"(a\'b)") == Args{"a'b"});
  CHECK(split("$HOME *") == Args{"$HOME", "*"});  // no expansion
}

TEST_CASE("unbalanced quotes and a trailing backslash are errors naming the flag and text") {
  CHECK(split_error("--mca x 'y") ==
        "--mpi-args '--mca x 'y': an unclosed single quote (') (quote words as in a shell: "
        "'a b', \"a b\" or a\\ b)");
  CHECK_THAT(split_error("-x \"A=b"), Catch::Contains("an unclosed double quote"));
  CHECK_THAT(split_error("abc\\"), Catch::Contains("a trailing backslash"));
}

TEST_CASE("display quoting") {
  CHECK(shell_quote("plain-arg_1.x/y:z") == "plain-arg_1.x/y:z");
  CHECK(shell_quote("a b") == "'a b'");
  CHECK(shell_quote("it's") == "'it'\\''s'");
  CHECK(shell_quote("") == "''");
  CHECK(format_command({"mpirun", "-x", "A", "a;b"}) == "mpirun -x A 'a;b'");
  // What format_command prints splits back into the same argv.
  const Args odd = {"a b", "it's", "", "x;y", "$HOME", "\"q\""};
  CHECK(split(format_command(odd)) == odd);
}
