// Single-process unit tests of hvdrun's parsing and command construction (nothing is launched).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
