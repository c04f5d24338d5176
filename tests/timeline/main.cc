// Catch2's main for the single-process timeline tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
