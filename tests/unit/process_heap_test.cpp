// dispose_before_exit (include/coopsim/base/process_heap.hpp): destroys at once unless the process
// ends after its command, and then keeps at most one object of a type waiting.
// prefer_huge_pages_for_heap: the blocks allocated after it lie in memory advised for huge pages.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#if defined(__linux__) && defined(__GLIBC__)
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "coopsim/base/process_heap.hpp"

namespace process_heap_test {

using namespace coopsim;

namespace {

int g_alive = 0;

struct Counted {
  int id;
  explicit Counted(int i) : id(i) { ++g_alive; }
  Counted(Counted&& other) noexcept : id(other.id) { ++g_alive; }
  Counted(const Counted&) = delete;
  Counted& operator=(const Counted&) = delete;
  Counted& operator=(Counted&&) = delete;
  ~Counted() { --g_alive; }
};

}  // namespace

TEST_CASE("dispose_before_exit: destroys now unless the process ends after its command", "[base]") {
  REQUIRE_FALSE(ends_after_command());  // only main() sets it
  g_alive = 0;
  dispose_before_exit(std::make_unique<Counted>(1));
  CHECK(g_alive == 0);
  {
    const DisposedBeforeExit<Counted> held(Counted(2));
    CHECK(held.get().id == 2);
    CHECK(g_alive == 1);
  }
  CHECK(g_alive == 0);

  set_ends_after_command(true);
  dispose_before_exit(std::make_unique<Counted>(3));
  CHECK(g_alive == 1);  // left to the exit
  dispose_before_exit(std::make_unique<Counted>(4));
  CHECK(g_alive == 1);  // the one before went: at most one waits
  { const DisposedBeforeExit<Counted> held(Counted(5)); }
  CHECK(g_alive == 1);
  set_ends_after_command(false);
  dispose_before_exit(std::make_unique<Counted>(6));
  CHECK(g_alive == 1);  // destroyed at once again; the one waiting stays until the exit
}

}  // namespace process_heap_test

#if defined(__linux__) && defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
namespace process_heap_test {
namespace {

// The "THPeligible" line of /proc/self/smaps for the mapping that holds `address`: 1 when the
// kernel may back it with huge pages, -1 when the mapping or the line is missing.
int thp_eligible(std::uintptr_t address) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= address && address < hi;
      continue;
    }
    if (inside && line.rfind("THPeligible:", 0) == 0) return std::stoi(line.substr(12));
  }
  return -1;
}

bool huge_pages_on_advice() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(f, modes);
  for (const int resource : {RLIMIT_AS, RLIMIT_DATA}) {  // the heap is then left alone
    struct rlimit r {};
    if (getrlimit(resource, &r) != 0 || r.rlim_cur != RLIM_INFINITY) return false;
  }
  return modes.find("[madvise]") != std::string::npos || modes.find("[always]") != std::string::npos;
}

}  // namespace

TEST_CASE("prefer_huge_pages_for_heap: the next small blocks lie in memory advised for huge pages", "[base]") {
  if (!huge_pages_on_advice()) {
    WARN("skipped: transparent huge pages are off or memory is limited here");
    return;
  }
  // In a child: the advice changes the whole process's heap for good.
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    coopsim::prefer_huge_pages_for_heap();
    // A block larger than all the free memory outside the heap's top comes from the top, where a
    // fresh process's blocks come from (this process has freed blocks of its own).
    const struct mallinfo2 info = mallinfo2();
    const std::size_t outside_top = info.fordblks - std::min(info.fordblks, info.keepcost);
    if (outside_top > (std::size_t{16} << 20)) _exit(2);
    void* volatile block = std::malloc(outside_top + 4096);
    _exit(thp_eligible(reinterpret_cast<std::uintptr_t>(static_cast<void*>(block))) == 1 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 2) {
    WARN("skipped: this process has too much free memory outside the heap's top");
    return;
  }
  CHECK(WEXITSTATUS(status) == 0);
}

}  // namespace process_heap_test
#endif
