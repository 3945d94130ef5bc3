// Errors for bad input. The library never exits; main() turns these into one-line messages
// and a non-zero status. Every message names where the problem is: file:line, or a config key.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace coopsim {

// A string from an input quoted for an error message: '...', control characters, quotes and
// backslashes as \xNN; longer than 80 bytes (kExcerptBytes, text.hpp), its first 80 bytes (cut
// on a UTF-8 boundary) then "...' (N bytes)" with N the full length. Every message that quotes
// what a user gave (a file's line, a --set value, an option value) goes through this.
std::string quote_excerpt(std::string_view s);

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A problem in an input file at a given line (1-based): a trace, a DTR log, a Kineto or
// Execution Trace, a pickle, a planner CSV, a replay plan, a config or sweep file.
// what() == "file:line: problem" (line 0: the file as a whole, e.g. it cannot be opened).
class InputError : public Error {
 public:
  InputError(const std::string& file, std::uint64_t line, const std::string& problem);
  const std::string& file() const { return file_; }
  std::uint64_t line() const { return line_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string file_;
  std::uint64_t line_;
  std::string problem_;
};

// A problem in configuration or on the command line. what() == "key: problem" (or just problem).
// key() and problem() are the parts with control characters escaped and nothing cut: code that
// re-keys an error ("file: " + key) builds the new one from them, not from what().
class ConfigError : public Error {
 public:
  ConfigError(const std::string& key, const std::string& problem);
  const std::string& key() const { return key_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string key_;
  std::string problem_;
};

// A bad command-line value found after parsing (advise's --reserve: not a size, or not below
// --capacity): the CLI exits with status 2, as for a value its parser refuses.
class UsageError : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

// A broken internal invariant (an allocator model bug). Thrown by check_invariants().
class InvariantError : public Error {
 public:
  using Error::Error;
};

}  // namespace coopsim
