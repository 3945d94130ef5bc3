// OutputFile (coopsim/base/output_file.hpp): temporary file + rename for regular targets, direct
// writes to FIFOs and character devices, write-through symbolic links, refusals, the signal
// cleanup; check_output_paths; the sweep directory lock.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "coopsim/cli/commands.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/base/output_file.hpp"
#include "coopsim/sweep/sweep.hpp"
#include "test_paths.hpp"

using namespace coopsim;
namespace fs = std::filesystem;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace output_file_test {

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void put(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

std::set<std::string> entries(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("output file: a new file appears only at commit, under its name alone", "[output]") {
  const fs::path dir = test::scratch_dir("out-new");
  const std::string target = (dir / "a.json").string();
  OutputFile f(target);
  CHECK_FALSE(f.direct());
  f.write("hello ");
  f.write("world\n");
  CHECK_FALSE(fs::exists(target));
  REQUIRE(entries(dir).size() == 1);
  const std::string temp = f.temp_path();
  CHECK(fs::path(temp).parent_path() == dir);
  CHECK(temp != target + ".tmp");
  f.commit();
  CHECK(slurp(target) == "hello world\n");
  CHECK(entries(dir) == std::set<std::string>{"a.json"});
}

TEST_CASE("output file: an existing file is untouched until commit and keeps its mode", "[output]") {
  const fs::path dir = test::scratch_dir("out-replace");
  const fs::path target = dir / "r.csv";
  put(target, "old\n");
  fs::permissions(target, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  {
    OutputFile f(target.string());
    f.write("new\n");
    CHECK(slurp(target) == "old\n");
    f.commit();
  }
  CHECK(slurp(target) == "new\n");
  CHECK((fs::status(target).permissions() & fs::perms::mask) ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));
  {
    OutputFile f(target.string());  // destroyed without commit: an exception on the way
    f.write("lost\n");
  }
  CHECK(slurp(target) == "new\n");
  CHECK(entries(dir) == std::set<std::string>{"r.csv"});
}

TEST_CASE("output file: the temporary name is not predictable, and a planted PATH.tmp is not followed", "[output]") {
  const fs::path dir = test::scratch_dir("out-planted");
  const fs::path victim = dir / "victim";
  put(victim, "precious\n");
  fs::create_symlink(victim, dir / "out.json.tmp");
  OutputFile a((dir / "out.json").string()), b((dir / "out.json").string());
  CHECK(a.temp_path() != b.temp_path());
  a.write("{}\n");
  a.commit();
  CHECK(slurp(dir / "out.json") == "{}\n");
  CHECK(slurp(victim) == "precious\n");
  CHECK(fs::is_symlink(dir / "out.json.tmp"));
}

TEST_CASE("output file: a FIFO is written directly, never replaced", "[output]") {
  const fs::path dir = test::scratch_dir("out-fifo");
  const fs::path fifo = dir / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // A reader first, so that opening the FIFO for writing does not wait.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(reader >= 0);
  OutputFile f(fifo.string());
  CHECK(f.direct());
  f.write("through the pipe\n");
  f.commit();
  char buf[64] = {};
  CHECK(::read(reader, buf, sizeof buf) == 17);
  ::close(reader);
  CHECK(std::string(buf) == "through the pipe\n");
  CHECK(fs::is_fifo(fs::symlink_status(fifo)));
  CHECK(entries(dir) == std::set<std::string>{"pipe"});
}

TEST_CASE("output file: a character device is written directly; its errors are reported", "[output]") {
  if (!fs::is_character_file("/dev/full")) return;
  OutputFile f("/dev/full");
  CHECK(f.direct());
  CHECK(error_of([&] { f.write("x"); }) == "/dev/full: cannot write output file: No space left on device");
  CHECK(fs::is_character_file("/dev/full"));
}

TEST_CASE("output file: a symbolic link is written through to its file", "[output]") {
  const fs::path dir = test::scratch_dir("out-link");
  fs::create_directories(dir / "real");
  put(dir / "real" / "file.json", "old\n");
  fs::create_symlink("real/file.json", dir / "link.json");
  write_file_atomic((dir / "link.json").string(), "new\n");
  CHECK(fs::is_symlink(dir / "link.json"));
  CHECK(slurp(dir / "real" / "file.json") == "new\n");
  CHECK(entries(dir) == std::set<std::string>{"link.json", "real"});
  CHECK(entries(dir / "real") == std::set<std::string>{"file.json"});
}

TEST_CASE("output file: refused targets leave nothing behind", "[output]") {
  const fs::path dir = test::scratch_dir("out-refused");
  fs::create_symlink("missing/target.json", dir / "dangling.json");
  fs::create_directories(dir / "sub");
  const std::string dangling = (dir / "dangling.json").string(), sub = (dir / "sub").string();
  CHECK(error_of([&] { OutputFile f(dangling); }) ==
        dangling + ": cannot write output file: it is a symbolic link to a missing file");
  CHECK(error_of([&] { OutputFile f(sub); }) == sub + ": cannot write output file: it is a directory");
  const std::string nodir = (dir / "nodir" / "x.json").string();
  CHECK(error_of([&] { OutputFile f(nodir); }) == nodir + ": cannot write output file: No such file or directory");
  CHECK(entries(dir) == std::set<std::string>{"dangling.json", "sub"});
  CHECK(entries(dir / "sub").empty());
}

TEST_CASE("output file: live temporary files are what the signal cleanup removes", "[output]") {
  const fs::path dir = test::scratch_dir("out-cleanup");
  OutputFile f((dir / "a.json").string());
  f.write("partial");
  REQUIRE(fs::exists(f.temp_path()));
  remove_live_temp_files();
  CHECK(entries(dir).empty());
}

TEST_CASE("output file: SIGINT and SIGTERM remove the temporary file and still end the process", "[output]") {
  for (const int sig : {SIGINT, SIGTERM}) {
    const fs::path dir = test::scratch_dir("out-signal");
    put(dir / "keep.json", "old\n");
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      install_output_signal_cleanup();
      OutputFile f((dir / "keep.json").string());
      OutputFile g((dir / "new.json").string());
      f.write("half");
      ::raise(sig);
      ::_exit(0);  // not reached: the signal ends the child
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == sig);
    CHECK(entries(dir) == std::set<std::string>{"keep.json"});
    CHECK(slurp(dir / "keep.json") == "old\n");
  }
}

TEST_CASE("output paths: an input is never an output, nor two outputs one file", "[output]") {
  const fs::path dir = test::scratch_dir("out-paths");
  const std::string trace = (dir / "t.jsonl").string(), hard = (dir / "h.jsonl").string();
  const std::string soft = (dir / "s.jsonl").string(), a = (dir / "a.json").string();
  put(trace, "x\n");
  fs::create_hard_link(trace, hard);
  fs::create_symlink("t.jsonl", soft);
  const std::vector<NamedPath> inputs{{"the trace", trace}, {"the config", ""}};
  auto check = [&](std::vector<NamedPath> outs) { return error_of([&] { check_output_paths(outs, inputs); }); };
  CHECK(check({{"--output", trace}}) ==
        "--output " + trace + " is the same file as the trace " + trace + ": refusing to overwrite an input");
  CHECK(check({{"--csv", hard}}) ==
        "--csv " + hard + " is the same file as the trace " + trace + ": refusing to overwrite an input");
  CHECK(check({{"--csv", soft}}) ==
        "--csv " + soft + " is the same file as the trace " + trace + ": refusing to overwrite an input");
  const std::string a2 = (dir / "." / "sub" / ".." / "a.json").string();
  CHECK(check({{"--output", a}, {"--timeline", ""}, {"--csv", a2}}) ==
        "--csv " + a2 + " is the same file as --output " + a + ": give each output its own file");
  CHECK(check({{"--output", a}, {"--csv", (dir / "b.csv").string()}}) == "(no error)");
  if (fs::is_character_file("/dev/null")) {  // writing /dev/null twice replaces nothing
    CHECK(check({{"--output", "/dev/null"}, {"--csv", "/dev/null"}}) == "(no error)");
  }
}

TEST_CASE("sweep directory lock: one holder at a time; released with its holder", "[output][sweep]") {
  const fs::path dir = test::scratch_dir("out-lock");
  const std::string lock = (dir / ".coopsim.lock").string();
  {
    const sweep::DirLock first(dir);
    CHECK(slurp(lock) == std::to_string(::getpid()) + "\n");
    // flock locks belong to open files, so a second open in this very process is refused too.
    CHECK(error_of([&] { sweep::DirLock second(dir); }) == dir.string() + ": another sweep is writing here (lock " +
                                                               lock + " held by pid " + std::to_string(::getpid()) +
                                                               ")");
  }
  put(lock, "999999\n");  // a stale file from a dead sweep holds no lock
  CHECK(error_of([&] { sweep::DirLock again(dir); }) == "(no error)");
  fs::remove(lock);
  fs::create_symlink("elsewhere", lock);
  CHECK(error_of([&] { sweep::DirLock planted(dir); }) ==
        lock + ": cannot open the sweep lock file: Too many levels of symbolic links");
  CHECK_FALSE(fs::exists(dir / "elsewhere"));
}

}  // namespace output_file_test
