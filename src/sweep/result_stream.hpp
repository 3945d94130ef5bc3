// A sweep's result files read and written one row or entry at a time (issue 32): what `coopsim
// merge` needs so that its memory does not grow with the sweep, and the writers that
// write_results shares with it, so that a merge and an unsharded sweep write the very same bytes.
// Private to src/sweep.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>

#include "coopsim/base/output_file.hpp"
#include "coopsim/sweep/sweep.hpp"

namespace coopsim::sweep {

// The run (search) index in `text`, the first column of a row or a results.json entry's "run";
// InputError "FILE:LINE: WHAT 'TEXT' is not one of this sweep's LIMIT WHATs" unless it is a
// number below `limit`.
std::size_t parse_index(const std::string& text, std::size_t limit, const std::filesystem::path& file,
                        std::uint64_t line, const char* what);

// ---- writing ---------------------------------------------------------------------------------

// An OutputFile (Target::Owned: a sweep directory's own file) written through a 1 MiB buffer.
// Nothing reaches the target's name before commit(); destroyed uncommitted, it leaves nothing.
class BufferedOutput {
 public:
  explicit BufferedOutput(const std::filesystem::path& path);
  void write(std::string_view bytes);
  void commit();

 private:
  OutputFile file_;
  std::string buffer_;
};

// results.json, byte for byte what `doc.dump(2) + "\n"` gives for the ordered document
// {"coopsim_version", "config_hash", "runs": [entries]}, written entry by entry: each entry's
// dump(2) indented by 4 spaces inside the list, "runs": [] when there is none.
class ResultsJsonWriter {
 public:
  ResultsJsonWriter(const std::filesystem::path& path, const Manifest& m);
  void add(const nlohmann::ordered_json& entry);
  void finish();  // the end of the list and the document; then commit()
  void commit() { out_.commit(); }

 private:
  BufferedOutput out_;
  bool empty_ = true;
};

// ---- pass 1: checking a finished shard's files -------------------------------------------------

// What reading a results.csv or minbudget.csv learned. The rows were checked as read_finished
// checks them (header, columns, index below the sweep's count, an index not repeated on the next
// line), and against the shard: the smallest index outside it, and the first row whose index is
// below the one before ("" when the file is in order).
struct RowScan {
  std::size_t count = 0;
  std::optional<std::size_t> outside;
  std::string disorder;
};
// Rows of `file` (none when it does not exist), read line by line. A last line without its
// newline is left out, as read_finished does.
RowScan scan_rows(const std::filesystem::path& file, const std::string& header, std::size_t limit, const char* what,
                  Shard shard);

// What reading a results.json learned, parsed as one stream (nlohmann's SAX interface: one entry's
// few fields are kept at a time, never the document). Errors as read_finished's: the document's
// own (invalid JSON, a key given twice, at their line), then "FILE: expected an object with a
// "runs" list", then the first bad entry ("FILE: runs[K]: ...").
struct EntryScan {
  std::size_t count = 0;
  std::streamoff runs_at = 0;          // offset just past the '[' of "runs"
  std::optional<std::size_t> missing;  // the smallest index of the shard without an entry
  std::string disorder;                // the first entry whose run is below the one before
};
EntryScan scan_entries(const std::filesystem::path& file, std::size_t limit, Shard shard, std::size_t shard_runs);

// ---- pass 2: a checked shard's rows and entries, in order ---------------------------------------

// Rows of a results.csv or minbudget.csv that scan_rows found complete and in order. next()
// returns the row of index `expected` (its next one); Error "FILE: changed during the merge ..."
// when the file no longer holds it.
class RowReader {
 public:
  RowReader(std::filesystem::path file, const char* what);
  const std::string& next(std::size_t expected);

 private:
  std::filesystem::path file_;
  const char* what_;
  std::ifstream in_;
  std::string line_;
};

// Entries of a results.json that scan_entries checked, read from `runs_at` one at a time: the
// text of the next element of "runs" (found by its brackets and strings), parsed alone.
class EntryReader {
 public:
  EntryReader(std::filesystem::path file, std::streamoff runs_at);
  nlohmann::ordered_json next(std::size_t expected);

 private:
  [[noreturn]] void changed(std::size_t expected) const;
  int skip_space();

  std::filesystem::path file_;
  std::ifstream in_;
  std::streambuf* buf_ = nullptr;
  bool first_ = true;
  std::string text_;
};

}  // namespace coopsim::sweep
