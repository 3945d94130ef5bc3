// A program outside the tree using the installed public API only (<coopsim/coopsim.hpp>, linked
// through pkg-config's `coopsim`): tests/cli/facade_test.py builds and runs it.
//   consumer TRACE CONFIG_JSON BUDGET [OVERRIDE...]   -> the report JSON on stdout, or
//                                                       "error: MESSAGE" and exit 1
#include <coopsim/coopsim.hpp>

#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: consumer TRACE CONFIG_JSON BUDGET [OVERRIDE...]\n";
    return 2;
  }
  try {
    const coopsim::api::Trace trace = coopsim::api::Trace::load(argv[1]);
    const std::vector<std::string> overrides(argv + 4, argv + argc);
    const coopsim::api::Config config = coopsim::api::Config::parse(argv[2], overrides);
    std::cout << coopsim::api::run(trace, config, argv[3]) << "\n";
    std::cerr << "version " << coopsim::api::version() << ", " << trace.events() << " events, peak live "
              << trace.peak_live_bytes() << "\n";
  } catch (const coopsim::api::Error& e) {
    std::cout << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
