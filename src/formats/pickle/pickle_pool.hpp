// Recycled storage for the unpickler's small, short-lived objects (a Value with its shared_ptr
// control block, a list's or dict's parser state). A streamed snapshot makes and drops about ten
// of them per history entry, and drops them in bursts of a thousand (an APPENDS batch leaves
// the stack at once); glibc's per-size caches hold only a few blocks, so most of those frees
// and the next allocations took its slow paths, about a sixth of the import's time. Freed
// blocks go to a per-thread list of their size and are handed out again before the heap is
// asked. Only the allocation changes: identity, use counts and what limits.max_memory counts
// are as with make_shared.
#pragma once

#include <cstddef>
#include <memory>
#include <new>

namespace coopsim::pickle::detail {

// Blocks of one size: a singly linked list threaded through the free blocks themselves.
template <std::size_t Size>
class FreeBlocks {
 public:
  // At most this many free blocks are kept per thread and size (about 8 MB of Values); beyond, they
  // go back to the heap, so a large tree parsed and dropped does not keep its memory.
  static constexpr std::size_t kKeep = std::size_t{1} << 16;

  static void* get() {
    List& l = list();
    if (l.head == nullptr) return ::operator new(Size);
    Node* n = l.head;
    l.head = n->next;
    --l.count;
    return n;
  }
  static void put(void* p) {
    List& l = list();
    if (l.count >= kKeep || l.gone) return ::operator delete(p);
    Node* n = ::new (p) Node{l.head};
    l.head = n;
    ++l.count;
  }

 private:
  struct Node {
    Node* next;
  };
  static_assert(Size >= sizeof(Node));
  struct List {
    Node* head = nullptr;
    std::size_t count = 0;
    bool gone = false;  // destroyed: a value freed later still (a static's, at exit) goes to the heap
    List() = default;
    List(const List&) = delete;
    List& operator=(const List&) = delete;
    ~List() {  // the thread ends: its free blocks go back
      while (head != nullptr) {
        Node* n = head;
        head = n->next;
        ::operator delete(n);
      }
      count = 0;
      gone = true;
    }
  };
  static List& list() {
    static thread_local List l;
    return l;
  }
};

// An allocator for std::allocate_shared: single objects from FreeBlocks, arrays from the heap.
template <class T>
struct Recycling {
  using value_type = T;
  Recycling() = default;
  template <class U>
  Recycling(const Recycling<U>&) {}  // NOLINT(google-explicit-constructor): allocate_shared rebinds
  T* allocate(std::size_t n) {
    if (n == 1) return static_cast<T*>(FreeBlocks<sizeof(T)>::get());
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) {
    if (n == 1) return FreeBlocks<sizeof(T)>::put(p);
    std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const Recycling<U>&) const {
    return true;
  }
};

// make_shared<T>() with recycled storage.
template <class T>
std::shared_ptr<T> make_recycled() {
  return std::allocate_shared<T>(Recycling<T>());
}

}  // namespace coopsim::pickle::detail
