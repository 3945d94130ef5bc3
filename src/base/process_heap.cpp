// Huge pages for the command line's heap (see process_heap.hpp).
#include "coopsim/base/process_heap.hpp"

#include <cstddef>  // defines __GLIBC__ (through <features.h>) for the test below

#if defined(__linux__) && defined(__GLIBC__)
#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <initializer_list>
#include <cstdlib>
#endif

namespace coopsim {

void prefer_huge_pages_for_heap() {
#if defined(__linux__) && defined(__GLIBC__) && defined(MADV_HUGEPAGE)
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  // Blocks below 32 MiB come from the heap rather than from mmap (whose pages would fault one by
  // one again), freed memory is not returned to the kernel below 512 MiB, and the heap grows 32
  // MiB at a time. A fixed M_MMAP_THRESHOLD also turns off glibc's sliding threshold.
  // Under a ulimit on memory, the heap's padding could turn a run that fits into one that fails
  // to allocate: the heap is then left as glibc sets it.
  for (const int resource : {RLIMIT_AS, RLIMIT_DATA}) {
    struct rlimit r {};
    if (getrlimit(resource, &r) != 0 || r.rlim_cur != RLIM_INFINITY) return;
  }
  if (mallopt(M_MMAP_THRESHOLD, static_cast<int>(32 * kMiB)) == 0) return;
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(512 * kMiB));
  mallopt(M_TOP_PAD, static_cast<int>(32 * kMiB));
  // One block makes the heap grow now; the span it added is advised, then given back to the
  // heap's top, where later blocks are carved from it.
  auto* const before = static_cast<char*>(sbrk(0));
  void* volatile block = std::malloc(24 * kMiB);  // volatile: the compiler may not drop the pair
  auto* const after = static_cast<char*>(sbrk(0));
  std::uintptr_t begin = 0;  // the first advised byte
  if (block != nullptr && before != reinterpret_cast<char*>(-1) && after > before) {
    begin = (reinterpret_cast<std::uintptr_t>(before) + kHuge - 1) & ~(kHuge - 1);
    const auto end = reinterpret_cast<std::uintptr_t>(after) & ~(kHuge - 1);
    if (end <= begin || madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) != 0) begin = 0;
  }
  const auto top = reinterpret_cast<std::uintptr_t>(static_cast<void*>(block));
  std::free(block);
  // The heap's top starts below the first huge page, in up to 2 MiB of 4 KiB pages, and a short
  // run's whole heap fitted there: unet under the simrd profile faulted 170 of those pages in
  // (about 2.5 us each). A block that is never freed now covers that head, so that the next
  // blocks start at `begin`. Its pages are never touched; only its address space is spent. With
  // glibc's chunk layout (a 16-byte header; a block of n bytes takes n + 8 rounded up to 16) the
  // next chunk's header lands on `begin` itself; were the layout otherwise, the head would be
  // covered all the same, give or take a chunk.
  if (begin > top + kHuge / 512) {
    static void* volatile head = nullptr;  // reachable: leak checkers see it in use
    head = std::malloc(begin - top + 8);
  }
#endif
}

}  // namespace coopsim

namespace coopsim {
namespace {
bool g_ends_after_command = false;
}  // namespace

void set_ends_after_command(bool ends) { g_ends_after_command = ends; }
bool ends_after_command() { return g_ends_after_command; }

}  // namespace coopsim
