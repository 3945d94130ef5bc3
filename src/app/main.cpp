// coopsim command line: standard output and its write errors, then the library's command line
// (src/cli/command_line.cpp), which parses the arguments and runs the command.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "coopsim/base/output_file.hpp"
#include "coopsim/base/process_heap.hpp"
#include "coopsim/cli/command_line.hpp"
#include "stdout_sink.hpp"

namespace {

// A report that never reached standard output (a full disk, `> /dev/full`) is a failed command:
// one line says so, and the status is 1 unless it is already non-zero.
int finish_stdout(int status, const coopsim::cli::StdoutSink* sink) {
  std::cout.flush();
  errno = 0;
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) != 0 || std::cout.fail() ||
                      (sink != nullptr && sink->error() != 0);
  if (!failed) return status;
  const int err = sink != nullptr && sink->error() != 0 ? sink->error() : errno;
  std::cerr << "coopsim: error: cannot write to standard output" << (err != 0 ? ": " : "")
            << (err != 0 ? std::strerror(err) : "") << "\n";
  return status != 0 ? status : 1;
}

}  // namespace

int main(int argc, char** argv) {
  coopsim::prefer_huge_pages_for_heap();
  coopsim::set_ends_after_command(true);
  coopsim::install_output_signal_cleanup();
  static coopsim::cli::StdoutSink sink;  // static: it outlives every use of std::cout
  const bool own_buffer = isatty(STDOUT_FILENO) == 0;
  std::streambuf* const stdio_buffer = own_buffer ? std::cout.rdbuf(&sink) : nullptr;
  const int status =
      finish_stdout(coopsim::run_command_line(argc, argv, std::cout, std::cerr), own_buffer ? &sink : nullptr);
  if (own_buffer) std::cout.rdbuf(stdio_buffer);
  return status;
}
