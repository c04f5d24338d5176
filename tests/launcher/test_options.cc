// hvdrun's command line: where the program starts, -np, flag errors, knob flags and --help.
#include <catch2/catch.hpp>

#include "core/settings.h"
#include "horovodcpp/horovod.h"
#include "launch_options.h"

using hvd::launcher::LaunchOptions;
using hvd::launcher::parse_command_line;
using Args = std::vector<std::string>;

namespace {

LaunchOptions parse(const Args& args) { return parse_command_line(args).options; }

std::string parse_error(const Args& args) {
  try {
    parse_command_line(args);
  } catch (const hvd::Error& e) {
    return e.what();
  }
  return "no error";
}

std::string knob(const LaunchOptions& o, const std::string& env) {
  for (const auto& [k, v] : o.knob_env)
    if (k == env) return v;
  return "<unset>";
}

}  // namespace

TEST_CASE("the program and its arguments start at the first word that is not hvdrun's") {
  auto o = parse({"-np", "4", "--verbose", "prog", "-np", "5", "--verbose", "a b"});
  CHECK(o.np == 4);
  CHECK(o.verbose);
  CHECK(o.command == Args{"prog", "-np", "5", "--verbose", "a b"});
  CHECK(parse({"-np=3", "prog"}).np == 3);
  CHECK(parse({"--num-proc", "2", "prog"}).np == 2);
  CHECK(parse({"--num-proc=6", "prog"}).np == 6);
  // "--" ends hvdrun's flags, so a program may start with a dash.
  CHECK(parse({"-np", "2", "--", "--odd-name", "x"}).command == Args{"--odd-name", "x"});
}

TEST_CASE("every launch flag is stored") {
  auto o = parse({"-np", "2", "-H", "a:1,b:1", "-p", "2222", "-i", "/k/id", "--network-interfaces",
                  "eth1", "--output-filename", "/tmp/out", "--mpi-args", "-mca x y",
                  "--start-timeout", "30", "--dry-run", "prog"});
  CHECK(o.hosts == "a:1,b:1");
  CHECK(o.ssh_port == 2222);
  CHECK(o.ssh_identity_file == "/k/id");
  CHECK(o.network_interfaces == "eth1");
  CHECK(o.output_filename == "/tmp/out");
  CHECK(o.mpi_args == "-mca x y");
  CHECK(o.start_timeout == 30);
  CHECK(o.dry_run);
  CHECK(parse({"--hosts=h:3", "--ssh-port=22", "--ssh-identity-file=f", "x"}).hosts == "h:3");
  CHECK(parse({"-Hh:3", "x"}).hosts == "h:3");
  CHECK(parse({"--hostfile", "/f", "x"}).hostfile == "/f");
}

TEST_CASE("knob flags become validated HOROVOD_* values") {
  auto o = parse({"-np", "1", "--fusion-threshold-mb", "64", "--cycle-time-ms", "2.5",
                  "--cache-capacity", "0", "--timeline-filename", "/tmp/t l.json",
                  "--timeline-mark-cycles", "--timeline-all-ranks", "--no-stall-check",
                  "--stall-check-warning-time-seconds", "30",
                  "--stall-check-shutdown-time-seconds", "120", "--liveness-timeout-seconds", "600",
                  "--hierarchical-allreduce",
                  "--autotune", "--autotune-log-file", "/tmp/tune.csv", "--autotune-warmup-samples", "0",
                  "--autotune-steps-per-sample", "4", "--autotune-bayes-opt-max-samples", "9",
                  "--autotune-gaussian-process-noise", "0.25",
                  "--log-level", "debug", "--dynamic-process-sets", "--log-without-timestamp", "prog"});
  CHECK(knob(o, "HOROVOD_FUSION_THRESHOLD") == std::to_string(64LL * 1024 * 1024));
  CHECK(knob(o, "HOROVOD_CYCLE_TIME") == "2.5");
  CHECK(knob(o, "HOROVOD_CACHE_CAPACITY") == "0");
  CHECK(knob(o, "HOROVOD_TIMELINE") == "/tmp/t l.json");
  CHECK(knob(o, "HOROVOD_TIMELINE_MARK_CYCLES") == "1");
  CHECK(knob(o, "HOROVOD_TIMELINE_ALL_RANKS") == "1");
  CHECK(knob(o, "HOROVOD_STALL_CHECK_DISABLE") == "1");
  CHECK(knob(o, "HOROVOD_STALL_CHECK_TIME_SECONDS") == "30");
  CHECK(knob(o, "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS") == "120");
  CHECK(knob(o, "HOROVOD_LIVENESS_TIMEOUT_SECONDS") == "600");
  CHECK(knob(o, "HOROVOD_HIERARCHICAL_ALLREDUCE") == "1");
  CHECK(knob(o, "HOROVOD_AUTOTUNE") == "1");
  CHECK(knob(o, "HOROVOD_AUTOTUNE_LOG") == "/tmp/tune.csv");
  CHECK(knob(o, "HOROVOD_AUTOTUNE_WARMUP_SAMPLES") == "0");
  CHECK(knob(o, "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE") == "4");
  CHECK(knob(o, "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES") == "9");
  CHECK(knob(o, "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE") == "0.25");
  CHECK(knob(o, "HOROVOD_DYNAMIC_PROCESS_SETS") == "1");
  CHECK(knob(o, "HOROVOD_LOG_LEVEL") == "debug");
  CHECK(knob(o, "HOROVOD_LOG_HIDE_TIME") == "1");
  // Every flag in the settings table was exercised above, each once.
  int with_flag = 0;
  for (const auto& s : hvd::detail::setting_specs()) with_flag += s.flag[0] != '\0';
  CHECK(static_cast<int>(o.knob_env.size()) == with_flag);
  CHECK(parse({"-np", "1", "prog"}).knob_env.empty());
  CHECK(knob(parse({"--fusion-threshold-mb", "0.5", "-np", "1", "p"}), "HOROVOD_FUSION_THRESHOLD") ==
        "524288");
}

TEST_CASE("bad knob values name the flag, the variable and the accepted form") {
  auto e = parse_error({"-np", "1", "--cycle-time-ms", "0", "p"});
  CHECK_THAT(e, Catch::Contains("--cycle-time-ms") && Catch::Contains("HOROVOD_CYCLE_TIME") &&
                    Catch::Contains("milliseconds > 0"));
  CHECK_THAT(parse_error({"-np", "1", "--fusion-threshold-mb", "-1", "p"}),
             Catch::Contains("--fusion-threshold-mb '-1'") && Catch::Contains("megabytes"));
  CHECK_THAT(parse_error({"-np", "1", "--fusion-threshold-mb", "lots", "p"}),
             Catch::Contains("megabytes"));
  // Too large for 64-bit bytes: the message shows the bound, not an overflowed value.
  auto huge = parse_error({"-np", "1", "--fusion-threshold-mb", "1e30", "p"});
  CHECK_THAT(huge, Catch::Contains("--fusion-threshold-mb '1e30': expected a number of megabytes >= 0 and < 8796093022208"));
  CHECK_THAT(huge, !Catch::Contains("-9223372036854775808"));
  CHECK_THAT(parse_error({"-np", "1", "--log-level", "loud", "p"}),
             Catch::Contains("HOROVOD_LOG_LEVEL='loud'") && Catch::Contains("trace,debug"));
  CHECK_THAT(parse_error({"-np", "1", "--cache-capacity", "-3", "p"}),
             Catch::Contains("HOROVOD_CACHE_CAPACITY"));
  CHECK_THAT(parse_error({"-np", "1", "--stall-check-warning-time-seconds", "soon", "p"}),
             Catch::Contains("HOROVOD_STALL_CHECK_TIME_SECONDS"));
  CHECK_THAT(parse_error({"-np", "1", "--autotune-steps-per-sample", "0", "p"}),
             Catch::Contains("--autotune-steps-per-sample '0'") &&
                 Catch::Contains("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE='0' is not valid: expected a whole number >= 1"));
  CHECK_THAT(parse_error({"-np", "1", "--autotune-gaussian-process-noise", "-0.1", "p"}),
             Catch::Contains("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE='-0.1' is not valid: expected a number >= 0"));
  CHECK_THAT(parse_error({"-np", "1", "--autotune-warmup-samples", "few", "p"}),
             Catch::Contains("HOROVOD_AUTOTUNE_WARMUP_SAMPLES='few'"));
}

TEST_CASE("input errors are clear") {
  CHECK_THAT(parse_error({"--bogus", "prog"}), Catch::Contains("unknown flag '--bogus'"));
  CHECK_THAT(parse_error({"-np", "2", "-Z", "prog"}), Catch::Contains("unknown flag '-Z'"));
  CHECK(parse_error({"-np", "abc", "prog"}) == "-np 'abc': expected a whole number >= 1");
  CHECK(parse_error({"-np", "0", "prog"}) == "-np '0': expected a whole number >= 1");
  CHECK(parse_error({"-np", "-1", "prog"}) == "-np '-1': expected a whole number >= 1");
  CHECK(parse_error({"-np=2x", "prog"}) == "-np '2x': expected a whole number >= 1");
  CHECK(parse_error({"--num-proc", "1.5", "prog"}) == "-np '1.5': expected a whole number >= 1");
  CHECK(parse_error({"-np", "99999999999999999999", "prog"}) ==
        "-np '99999999999999999999': expected a whole number >= 1");
  CHECK_THAT(parse_error({"-np", "2"}), Catch::Contains("missing program"));
  CHECK_THAT(parse_error({"-np"}), Catch::Contains("-np needs a value"));
  CHECK_THAT(parse_error({"--verbose=1", "p"}), Catch::Contains("takes no value"));
  CHECK_THAT(parse_error({"-H", "a:1", "--hostfile", "f", "p"}), Catch::Contains("not both"));
  CHECK(parse_error({"-np", "1", "-p", "0", "p"}) == "-p/--ssh-port '0': expected a port number 1..65535");
  CHECK(parse_error({"-np", "1", "-p", "ssh", "p"}) ==
        "-p/--ssh-port 'ssh': expected a port number 1..65535");
  CHECK(parse_error({"-np", "1", "--start-timeout", "0", "p"}) ==
        "--start-timeout '0': expected a whole number of seconds >= 1");
  CHECK(parse_error({"-np", "1", "--start-timeout", "soon", "p"}) ==
        "--start-timeout 'soon': expected a whole number of seconds >= 1");
}

TEST_CASE("an empty value is refused by name, and -H \"\" gets the host list's message") {
  CHECK(parse_error({"-H", "", "prog"}) == "-H/--hosts: empty host list (expected host:slots,...)");
  CHECK(parse_error({"--hosts=", "prog"}) == "-H/--hosts: empty host list (expected host:slots,...)");
  // CLI11 alone would take the next word as the value; hvdrun refuses the empty one instead.
  CHECK(parse_error({"--hostfile", "", "-np", "1", "prog"}) == "flag --hostfile needs a non-empty value");
  CHECK(parse_error({"--output-filename=", "-np", "1", "p"}) ==
        "flag --output-filename needs a non-empty value");
  CHECK(parse_error({"-np", "", "p"}) == "flag -np needs a non-empty value");
  CHECK(parse({"--mpi-args", "", "-np", "1", "p"}).mpi_args.empty());
  CHECK(parse({"--mpi-args", "", "-np", "1", "p"}).np == 1);
}

TEST_CASE("-i with whitespace and --mpi-args with an unclosed quote are refused") {
  CHECK_THAT(parse_error({"-np", "1", "-i", "/k/my key", "p"}),
             Catch::StartsWith("-i/--ssh-identity-file '/k/my key': the path contains whitespace"));
  CHECK_THAT(parse_error({"-np", "1", "--ssh-identity-file=/k/a\tb", "p"}),
             Catch::Contains("--ssh-identity-file"));
  CHECK(parse({"-np", "1", "-i", "/k/my_key", "p"}).ssh_identity_file == "/k/my_key");
  CHECK_THAT(parse_error({"-np", "1", "--mpi-args", "-x \"A=b", "p"}),
             Catch::StartsWith("--mpi-args '-x \"A=b': an unclosed double quote"));
}

TEST_CASE("--help lists every knob flag of the settings table; --version needs no program") {
  auto parsed = parse_command_line({"--help"});
  REQUIRE_FALSE(parsed.help.empty());
  for (const auto& s : hvd::detail::setting_specs()) {
    if (s.flag[0] == '\0') continue;
    CHECK_THAT(parsed.help, Catch::Contains(std::string("--") + s.flag) && Catch::Contains(s.env));
  }
  CHECK_THAT(parsed.help, Catch::Contains("-np"));
  CHECK(parse({"--version"}).version);
  CHECK(parse({"--check-build"}).check_build);
  // horovodrun's short forms.
  CHECK(parse({"-v"}).version);
  CHECK_FALSE(parse({"-v"}).check_build);
  CHECK(parse({"-cb"}).check_build);
  CHECK_FALSE(parse({"-cb"}).version);
  CHECK_THAT(parse_error({"-cb=1"}), Catch::Contains("takes no value"));
  CHECK_THAT(parsed.help, Catch::Contains("-v,") && Catch::Contains("-cb"));
}

// The help text, written independently of knobs.cc, that each declaration must produce.
static std::string expected_default(const hvd::detail::SettingSpec& s) {
  const std::string value = s.default_value;
  if (s.kind == hvd::detail::SettingKind::Flag) return value == "1" ? "on by default" : "off by default";
  if (value.empty()) return "unset by default";
  if (std::string(s.flag).size() > 3 && std::string(s.flag).substr(std::string(s.flag).size() - 3) == "-mb")
    return "default " + std::to_string(std::stoll(value) / (1024 * 1024));
  return "default " + value;
}

TEST_CASE("--help lists every declared setting with its default, on the line that names it") {
  const std::string help = parse_command_line({"--help"}).help;
  // A flag's description may start on the line after the flag; it ends at the next option.
  auto entry = [&](const std::string& name) {
    const auto at = help.find(name);
    if (at == std::string::npos) return std::string();
    const auto end = help.find("\n  -", at + 1), end2 = help.find("\n  HOROVOD_", at + 1);
    return help.substr(at, std::min(end, end2) - at);
  };
  for (const auto& s : hvd::detail::setting_specs()) {
    INFO(s.env);
    const std::string text = entry(s.flag[0] != '\0' ? std::string("--") + s.flag + " " : std::string("  ") + s.env);
    REQUIRE_FALSE(text.empty());
    CHECK_THAT(text, Catch::Contains(s.env) && Catch::Contains(expected_default(s), Catch::CaseSensitive::No));
  }
  CHECK_THAT(entry("--fusion-threshold-mb "), Catch::Contains("default 128."));
  CHECK_THAT(entry("--liveness-timeout-seconds "), Catch::Contains("default 1800."));
  CHECK_THAT(entry("  HOROVOD_START_TIMEOUT"), Catch::Contains("Default 30."));
  CHECK_THAT(entry("--dynamic-process-sets "), Catch::Contains("HOROVOD_DYNAMIC_PROCESS_SETS; off by default."));
}

TEST_CASE("horovodrun's names: aliases, and a switch that contradicts its knob flag is refused by both names") {
  auto o = parse({"--min-num-proc", "2", "--max-num-proc", "4", "--host-discovery-script", "./d", "-np", "2", "prog"});
  CHECK(o.min_np == 2);
  CHECK(o.max_np == 4);
  CHECK(parse({"-np", "2", "--network-interface=eth2", "prog"}).network_interfaces == "eth2");
  CHECK(parse({"-np", "2", "--binding-args", "--rankfile f", "prog"}).binding_args == Args{"--rankfile", "f"});
  CHECK(parse({"-np", "2", "--binding-args=-bind-to 'core'", "prog"}).binding_args == Args{"-bind-to", "core"});
  CHECK(parse_error({"-np", "2", "--autotune", "--no-autotune", "prog"}) ==
        "--no-autotune contradicts --autotune (HOROVOD_AUTOTUNE=1): give one of them");
  CHECK(parse_error({"-np", "2", "--no-stall-check", "--stall-check", "prog"}) ==
        "--stall-check contradicts --no-stall-check (HOROVOD_STALL_CHECK_DISABLE=1): give one of them");
  CHECK(parse_error({"-np", "2", "--log-without-timestamp", "--log-with-timestamp", "prog"}) ==
        "--log-with-timestamp contradicts --log-without-timestamp (HOROVOD_LOG_HIDE_TIME=1): give one of them");
  // Two names for the same value agree.
  CHECK(knob(parse({"-np", "2", "--log-without-timestamp", "--log-hide-timestamp", "prog"}), "HOROVOD_LOG_HIDE_TIME") == "1");
  CHECK(parse_error({"-np", "2", "--binding-args", "''", "prog"}) ==
        "--binding-args '''': needs mpirun binding arguments without empty words, e.g. '-bind-to core'");
}

