// Process-wide heap tuning for the command line (src/app/main.cpp): not for a library embedded in
// another program (the Python module), whose heap belongs to its host.
#pragma once

#include <memory>
#include <mutex>
#include <utility>

namespace coopsim {

// Asks for transparent huge pages over the first tens of MiB of the malloc heap and keeps freed
// memory in it (glibc on Linux; elsewhere it does nothing). In a virtual machine the first touch
// of a 4 KiB page costs about 2.5 us, and a simulation's state arrays are touched once each: the
// simrd profile on a 1.6 MB DTR log took 2,300 page faults, a quarter of its run
// (docs/performance.md). Only advice: where the kernel declines, nothing changes but speed.
void prefer_huge_pages_for_heap();

// main() says the process ends when its command returns (before any command runs or any thread
// starts). Elsewhere (tests, the Python module, any other program) dispose_before_exit destroys as
// usual.
void set_ends_after_command(bool ends);
[[nodiscard]] bool ends_after_command();

// Destroys `object` now, unless the process ends after this command: then the kernel takes the
// whole heap back at once, and freeing a trace's tens of thousands of blocks one by one was 5 % of
// a short simrd-profile run. At most one object of each type waits (a command with several runs
// destroys the one before), so memory stays bounded; it stays reachable from a static pointer,
// so leak checkers see it as in use, not lost.
template <class T>
void dispose_before_exit(std::unique_ptr<T> object) {
  if (!ends_after_command()) return;
  static std::mutex lock;  // a sweep's runs end on several threads
  static T* waiting = nullptr;
  T* previous = nullptr;
  {
    const std::lock_guard<std::mutex> hold(lock);
    previous = std::exchange(waiting, object.release());
  }
  delete previous;
}

// Owns a command's largest structure (its trace) and hands it to dispose_before_exit when the
// command's scope ends, on every path out.
template <class T>
class DisposedBeforeExit {
 public:
  explicit DisposedBeforeExit(T&& value) : object_(std::make_unique<T>(std::move(value))) {}
  DisposedBeforeExit(const DisposedBeforeExit&) = delete;
  DisposedBeforeExit& operator=(const DisposedBeforeExit&) = delete;
  ~DisposedBeforeExit() { dispose_before_exit(std::move(object_)); }
  [[nodiscard]] const T& get() const { return *object_; }

 private:
  std::unique_ptr<T> object_;
};

}  // namespace coopsim
