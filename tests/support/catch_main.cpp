// Catch2 v2 main with the TAP reporter, so Meson counts each test case.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#include <catch2/catch_reporter_tap.hpp>
