// The coopsim command line as a library function: the executable (src/app/main.cpp) and the
// Python module (python/native) call it with their arguments and streams.
#pragma once

#include <iosfwd>

namespace coopsim {

// Parses `argv` (argv[0] the program name) as `coopsim ...` and runs the command, writing its
// output to `out` and its one-line errors ("coopsim: error: ...") to `err`. Returns the exit
// status (docs/architecture.md, "Errors and exit status"). Never throws.
int run_command_line(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace coopsim
