// Single-process unit tests of the elastic parts (nothing is launched).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
