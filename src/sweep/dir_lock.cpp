// DirLock (coopsim/sweep/sweep.hpp): one writer per sweep directory. flock rather than an O_EXCL
// pid file because the kernel releases it when the process dies, however it dies: a sweep killed
// with SIGKILL or a crashed node never leaves a lock that blocks the next run.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "coopsim/base/error.hpp"
#include "coopsim/sweep/sweep.hpp"

namespace coopsim::sweep {

namespace {

// The holder's pid as it wrote it, or "" when the file holds no plain number (yet).
std::string holder_pid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return "";
  std::string s(buf, static_cast<std::size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string::npos) return "";
  return s;
}

}  // namespace

DirLock::DirLock(const std::filesystem::path& dir) {
  const std::string path = (dir / kLockFile).string();
  // O_NOFOLLOW: a link planted at the lock's name must not make coopsim create or lock its target.
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(path + ": cannot open the sweep lock file: " + std::strerror(errno));
  struct stat st {};
  // A second hard link would make the truncation below reach a file outside the sweep.
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
    ::close(fd_);
    throw Error(path + ": the sweep lock file is not a regular file of its own (a link to another file?)");
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string pid = err == EWOULDBLOCK ? holder_pid(fd_) : "";
    ::close(fd_);
    if (err != EWOULDBLOCK) throw Error(path + ": cannot lock the sweep lock file: " + std::strerror(err));
    throw Error(dir.string() + ": another sweep is writing here (lock " + path +
                (pid.empty() ? " held by another process)" : " held by pid " + pid + ")"));
  }
  // For the message a second sweep prints; the lock itself is the flock, not this number.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int err = errno;
    ::close(fd_);
    throw Error(path + ": cannot write the sweep lock file: " + std::strerror(err));
  }
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace coopsim::sweep
