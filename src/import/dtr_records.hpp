// Reading DTR prototype logs record by record. Private to src/import.
//
// A DTR log is JSON Lines written by the DTRLog* functions of the DTR PyTorch patch
// (uwsampl/dtr-prototype @eff53cc4, dtr_code/dtr-implementation.patch, aten/src/ATen/Logger.h):
// one object per line, the key INSTRUCTION selects the record, every value is a string except
// ARGS / RESULT (arrays of names) and MUTATE (array of argument indices). The field set per
// instruction is the one the reference reader simrd/simrd/parse/parse.py reads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coopsim/base/capped_input.hpp"
#include "coopsim/model/memory_cap.hpp"

namespace coopsim::dtr_detail {

enum class Instr : std::uint8_t { Annotate, Constant, Memory, Call, Alias, Copy, Release, Mutate, CopyFrom };
std::string_view instr_name(Instr i);

// One validated record. Only the fields of its instruction are set.
struct DtrRecord {
  Instr instr = Instr::Annotate;
  std::uint64_t line = 0;
  std::string name;                   // NAME: a handle, or the op name for CALL / MUTATE
  std::string annotation;             // ANNOTATE
  std::string dst, src;               // COPY, COPY_FROM
  std::vector<std::string> args;      // CALL, MUTATE
  std::vector<std::string> result;    // CALL
  std::vector<std::uint64_t> mutate;  // MUTATE: argument indices
  std::uint64_t memory = 0;           // MEMORY: bytes
  std::int64_t alias = -1;            // ALIAS: -1 (fresh storage) or an argument index
  std::int64_t time_ns = 0;           // CALL, MUTATE
};

// Streams a log (plain or gzip, detected by zlib) and parses each non-blank line into a
// DtrRecord. Throws InputError("file:line: problem") on unreadable files, more than `max_bytes`
// decompressed bytes (limits.max_input_bytes), malformed JSON, unknown instructions, missing
// fields and values of the wrong type or form. It keeps the memory cap of the import
// (limits.max_memory): a line is parsed only if its JSON document fits in what is left, and the
// converter counts what it keeps through hold().
class DtrLogReader {
 public:
  DtrLogReader(std::string path, std::uint64_t max_bytes, std::uint64_t max_memory);
  DtrLogReader(const DtrLogReader&) = delete;
  DtrLogReader& operator=(const DtrLogReader&) = delete;

  // The next record, or false at the end of the file.
  bool next(DtrRecord& out);
  // After next() returned false: the line after the last line (where end-of-file problems are
  // reported, as the trace loader does).
  [[nodiscard]] std::uint64_t end_line() const { return line_ + 1; }
  [[nodiscard]] const std::string& path() const { return path_; }
  // Counts `bytes` kept for the record last read (with an element appended to `v`), or throws
  // InputError("file:line: more than N bytes of memory (limits.max_memory)") at its line.
  void hold(std::uint64_t bytes) {
    if (!memory_.add(bytes)) fail(memory_.problem());
  }
  template <class T>
  void hold(const std::vector<T>& v, std::uint64_t bytes) {
    if (!memory_.add_append(v, bytes)) fail(memory_.problem());
  }

 private:
  bool read_line(std::string& line, bool& no_newline);
  [[noreturn]] void fail(const std::string& problem) const;

  std::string path_;
  MemoryCap memory_;
  CappedInput in_;
  std::vector<char> buf_;
  std::size_t pos_ = 0, len_ = 0;
  bool eof_ = false;
  std::uint64_t line_ = 0;
};

// The public logs are named "<model>-<batch>-<budget>-<date>-default.log" (uwsampl/dtr-prototype
// @eff53cc4 simrd/logs.zip); nullopt for a file name of another shape. A ".gz" suffix is ignored.
struct LogName {
  std::string model, batch, budget;
};
std::optional<LogName> parse_log_name(std::string file_name);

// Quotes a string for an error message: '...', control characters as \xNN, shortened.
std::string quote(std::string_view s);

}  // namespace coopsim::dtr_detail
