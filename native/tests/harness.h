// The counting and main loop of the native tests that run as one program: each test function checks as it
// goes, an exception out of one counts as a failure of it, and the exit status says whether all held.
#pragma once
#include <chrono>
#include <cstdio>
#include <exception>
#include <initializer_list>
#include <string>
#include <utility>

namespace spmd::testing {

inline int passed = 0, failed = 0;

inline void check(bool ok, const std::string& what) {
  if (ok) {
    ++passed;
  } else if (++failed <= 30) {  // the first ones say what broke; a flood would bury them
    std::printf("FAIL %s\n", what.c_str());
  }
}

inline int runTests(std::initializer_list<std::pair<const char*, void (*)()>> tests) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const auto start = std::chrono::steady_clock::now();
  for (const auto& [name, fn] : tests) {
    try {
      fn();
    } catch (const std::exception& e) {
      check(false, std::string(name) + ": " + e.what());
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%d passed, %d failed (%.1f s)\n", passed, failed, secs);
  return failed == 0 ? 0 : 1;
}

}  // namespace spmd::testing
