// OutputFile: temporary file + rename for regular targets, direct writes for FIFOs and character
// devices, and the registry of live temporary files a signal handler removes (output_file.hpp).
#include "coopsim/base/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#if __has_include(<sys/random.h>)
#include <sys/random.h>
#define COOPSIM_HAVE_GETRANDOM 1
#endif
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <random>

#include "coopsim/base/error.hpp"

namespace coopsim {
namespace {

namespace fs = std::filesystem;

// The registry is a fixed array so that the signal handler touches no heap and takes no lock:
// it reads each slot's state (a lock-free atomic) and unlinks the path of the live ones. A slot is
// claimed, filled, then marked live; it is marked free before its path may change again.
enum SlotState : int { kFree = 0, kClaimed = 1, kLive = 2 };
struct Slot {
  std::atomic<int> state{kFree};
  std::array<char, 4096> path{};
};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");
constexpr int kSlots = 64;
std::array<Slot, kSlots> g_slots;

int claim_slot() {
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (g_slots[i].state.compare_exchange_strong(expected, kClaimed)) return i;
  }
  return -1;
}

void set_slot_path(int slot, const std::string& path) {
  Slot& s = g_slots[slot];
  s.state.store(kClaimed);
  std::memcpy(s.path.data(), path.c_str(), path.size() + 1);
  s.state.store(kLive);
}

void release_slot(int& slot) noexcept {
  if (slot >= 0) g_slots[slot].state.store(kFree);
  slot = -1;
}

extern "C" void on_fatal_signal(int sig) {
  remove_live_temp_files();
  // SA_RESETHAND restored the default action; the signal is blocked until this handler returns,
  // so the process then ends by it, with the status a parent expects.
  raise(sig);
}

// 16 hex digits from the system's random source: a name nobody can plant in advance. getrandom(2)
// first: std::random_device's set-up asks the CPU for its random instructions with cpuid, which a
// virtual machine answers in about 6 us a call (docs/performance.md).
std::string random_suffix() {
  std::uint64_t v = 0;
  bool filled = false;
#ifdef COOPSIM_HAVE_GETRANDOM
  filled = getrandom(&v, sizeof v, GRND_NONBLOCK) == static_cast<ssize_t>(sizeof v);
#endif
  if (!filled) {
    std::random_device rd;
    v = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 0; i < 16; ++i) s[i] = kHex[(v >> (4 * i)) & 0xF];
  return s;
}

// /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: an already open descriptor, not a file
// to replace (its link leads through /proc to whatever the descriptor is).
bool names_descriptor(const std::string& path) {
  return path == "/dev/stdout" || path == "/dev/stderr" || path.starts_with("/dev/fd/") ||
         path.starts_with("/proc/self/fd/");
}

// Why an existing entry of mode `mode` (lstat) may not be replaced as an owned file (Target::Owned),
// or "" when it may: only a regular file may.
std::string owned_problem(mode_t mode) {
  const char* what = S_ISREG(mode) ? nullptr : S_ISLNK(mode) ? "a symbolic link" : S_ISDIR(mode) ? "a directory"
                                                                                                  : "not a regular file";
  if (what == nullptr) return "";
  return std::string("it is ") + what + ": coopsim replaces only a regular file here, never what a link or device leads to";
}

}  // namespace

void check_owned_output(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw Error(path + ": cannot write output file: " + std::strerror(errno));
  }
  if (const std::string problem = owned_problem(st.st_mode); !problem.empty()) {
    throw Error(path + ": cannot write output file: " + problem);
  }
}

OutputFile::OutputFile(std::string path, Target kind) : path_(std::move(path)) {
  if (path_.empty()) throw Error("an output file name is empty");
  struct stat st {};
  bool exists = true;
  if (::lstat(path_.c_str(), &st) != 0) {
    if (errno != ENOENT) fail("", errno);
    exists = false;
  }
  if (kind == Target::Owned && exists) {
    // A new temporary file is renamed over the name itself: a link planted there after this
    // check is replaced, never followed.
    if (const std::string problem = owned_problem(st.st_mode); !problem.empty()) fail(problem, 0);
  }
  const bool link = exists && S_ISLNK(st.st_mode);
  if (link && ::stat(path_.c_str(), &st) != 0) {  // what the link finally names
    if (errno == ENOENT) fail("it is a symbolic link to a missing file", 0);
    fail("", errno);
  }
  if (exists && S_ISDIR(st.st_mode)) fail("it is a directory", 0);
  if (exists && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || (S_ISREG(st.st_mode) && names_descriptor(path_)))) {
    // A pipe, a device, or an open descriptor (`-o /dev/stdout` when stdout is a file: appended
    // to, as the shell's own redirection is still writing it).
    fd_ = ::open(path_.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC | (S_ISREG(st.st_mode) ? O_APPEND : 0));
    if (fd_ < 0) fail("", errno);
    struct stat now {};
    if (::fstat(fd_, &now) != 0 || (now.st_mode & S_IFMT) != (st.st_mode & S_IFMT)) {
      close_fd();
      fail("it changed while being opened", 0);
    }
    return;
  }
  if (exists && !S_ISREG(st.st_mode)) fail("it is not a regular file, FIFO or character device", 0);
  target_ = path_;
  if (link) {  // written through: the file the link finally names is what gets replaced
    std::error_code ec;
    target_ = fs::canonical(path_, ec).string();
    if (ec) fail("", ec.value());
  }

  const fs::path target(target_);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // Keep the name under NAME_MAX (255) whatever the target's name is.
  const std::string base = target.filename().string().substr(0, 200);
  slot_ = claim_slot();
  if (slot_ < 0) fail("more than 64 output files open at once", 0);
  for (int attempt = 0;; ++attempt) {
    temp_ = (dir / (base + "." + random_suffix() + ".tmp")).string();
    if (temp_.size() >= g_slots[0].path.size()) {
      release_slot(slot_);
      temp_.clear();
      fail("", ENAMETOOLONG);
    }
    // Registered before it exists, so no window leaves an unregistered file behind.
    set_slot_path(slot_, temp_);
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd_ >= 0) break;
    const int err = errno;
    g_slots[slot_].state.store(kClaimed);
    if (err != EEXIST || attempt == 100) {
      release_slot(slot_);
      temp_.clear();
      fail("", err);
    }
  }
  if (exists && ::fchmod(fd_, st.st_mode & 07777) != 0) {
    const int err = errno;
    discard();
    fail("", err);
  }
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : path_(std::move(other.path_)),
      target_(std::move(other.target_)),
      temp_(std::move(other.temp_)),
      fd_(other.fd_),
      slot_(other.slot_),
      published_(other.published_) {
  other.temp_.clear();
  other.fd_ = -1;
  other.slot_ = -1;
}

OutputFile::~OutputFile() { discard(); }

void OutputFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
  release_slot(slot_);
}

void OutputFile::close_fd() {
  const int fd = fd_;
  fd_ = -1;
  if (fd >= 0 && ::close(fd) != 0 && errno != EINTR) fail("", errno);
}

void OutputFile::fail(const std::string& what, int err) {
  const int saved = err;
  discard();
  std::string msg = path_ + ": cannot write output file";
  if (!what.empty()) msg += ": " + what;
  if (saved != 0) msg += std::string(": ") + std::strerror(saved);
  throw Error(msg);
}

void OutputFile::write(std::string_view bytes) {
  if (fd_ < 0) throw Error(path_ + ": cannot write output file: it is closed");
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("", errno);
    }
    if (n == 0) fail("", EIO);
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

void OutputFile::publish() {
  if (temp_.empty()) return;
  if (::rename(temp_.c_str(), target_.c_str()) != 0) fail("", errno);
  temp_.clear();
  release_slot(slot_);
  published_ = true;
}

void OutputFile::commit() {
  close_fd();
  publish();
}

void remove_live_temp_files() noexcept {
  for (Slot& s : g_slots) {
    if (s.state.load() == kLive) ::unlink(s.path.data());
  }
}

void install_output_signal_cleanup() {
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;  // nohup, background jobs
    struct sigaction sa {};
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    ::sigaction(sig, &sa, nullptr);
  }
}

}  // namespace coopsim
