// The one way coopsim writes a file (docs/user-guide.md, "Output files"). Every report, export,
// trace, plan and sweep file goes through OutputFile, so the rules below hold for all of them:
//
// * A regular file (or a path that does not exist yet) is written to a temporary file created
//   with O_CREAT|O_EXCL|O_NOFOLLOW under an unpredictable name in the target's own directory,
//   and renamed over the target at commit(). Until then the target is untouched; an OutputFile
//   destroyed without commit() (an exception, a failed write) removes its temporary file. A
//   replaced file keeps its permission bits; a new one gets 0666 minus the umask.
// * A FIFO or a character device (a pipe, /dev/null, a terminal) is written directly: it is
//   never replaced by a regular file. So is an open descriptor named as /dev/stdout, /dev/stderr,
//   /dev/fd/N or /proc/self/fd/N, appended to when it is a regular file.
// * A symbolic link is written through: the file it finally points to is replaced (the link
//   stays a link), or written directly when that is a FIFO or character device. A link to
//   nothing is refused (coopsim does not create files at a link's destination).
// * Anything else (a directory, a block device, a socket) is refused.
//
// Temporary files alive in the process are kept in a fixed registry that a SIGINT/SIGTERM/SIGHUP
// handler (install_output_signal_cleanup(), called by main) unlinks before the signal's default
// action ends the process.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace coopsim {

class OutputFile {
 public:
  // What the target may be. Any: the rules above. Owned: a file coopsim owns, in a directory it
  // writes for itself (a sweep directory's results.csv, journal.jsonl, ...): only a regular file
  // is replaced (a new one created); a symbolic link, FIFO, device or anything else found at the
  // name is refused ("it is a symbolic link: ..."), so a link planted there is never followed.
  enum class Target { Any, Owned };
  // Opens `path` for writing by the rules above; throws Error "PATH: problem" when it cannot.
  explicit OutputFile(std::string path, Target target = Target::Any);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&&) = delete;

  // Writes all of `bytes` (retrying short writes); Error "PATH: cannot write: why" on failure.
  void write(std::string_view bytes);
  // The open descriptor, for writers that need one (the gzip trace writer dup()s it).
  [[nodiscard]] int fd() const { return fd_; }
  // Closes and renames the temporary file over the target (closes a direct target). Throws
  // Error on failure, after removing the temporary file.
  void commit();
  // Renames the temporary file into place now but keeps the descriptor open for appending:
  // the sweep's result files grow row by row under their final names.
  void publish();
  [[nodiscard]] const std::string& path() const { return path_; }
  // True when the target is a FIFO or character device, written without a temporary file.
  [[nodiscard]] bool direct() const { return temp_.empty() && !published_; }
  [[nodiscard]] const std::string& temp_path() const { return temp_; }

 private:
  [[noreturn]] void fail(const std::string& what, int err);
  void close_fd();
  void discard() noexcept;

  std::string path_;    // as given, for messages
  std::string target_;  // what rename() replaces: path_ with symbolic links resolved
  std::string temp_;    // empty for a direct target and after commit()/publish()
  int fd_ = -1;
  int slot_ = -1;  // registry slot of temp_
  bool published_ = false;
};

// Installs the SIGINT/SIGTERM/SIGHUP handler that removes live temporary files, then lets the
// signal end the process as it would have (a signal the process ignores stays ignored).
void install_output_signal_cleanup();
// What the handler does, callable from tests: unlinks every registered temporary file.
void remove_live_temp_files() noexcept;

// A file a command reads or writes, with the words that name it in messages: "--csv", "the trace".
struct NamedPath {
  std::string label;
  std::string path;
};
// Refuses (Error) an output that is one of the inputs and two outputs that are one file, by
// device and inode for files that exist (so links count) and by the normalized path otherwise.
// Character devices (/dev/null) are exempt: writing them replaces nothing. Empty paths are
// skipped. Messages: "--csv a.json is the same file as --output a.json: give each output its
// own file", "--output t.jsonl is the same file as the trace t.jsonl: refusing to overwrite an
// input".
void check_output_paths(std::span<const NamedPath> outputs, std::span<const NamedPath> inputs);

// Write `content` to `path` through an OutputFile (above): a temporary file
// renamed over a regular target, direct writes to a FIFO or character device.
void write_file_atomic(const std::string& path, const std::string& content,
                       OutputFile::Target target = OutputFile::Target::Any);

// For OutputFile::Target::Owned: Error "PATH: cannot write output file: it is a symbolic link
// (...)" unless PATH does not exist or is a regular file (lstat: a link is not followed). Lets a
// command refuse such a name before it reads or writes anything (a sweep, before --resume reads).
void check_owned_output(const std::string& path);

}  // namespace coopsim
