// Process-wide heap tuning for the command line (src/app/main.cpp): not for a library embedded in
// another program (the Python module), whose heap belongs to its host.
#pragma once

namespace coopsim {

// Asks for transparent huge pages over the first tens of MiB of the malloc heap and keeps freed
// memory in it (glibc on Linux; elsewhere it does nothing). In a virtual machine the first touch
// of a 4 KiB page costs about 2.5 us, and a simulation's state arrays are touched once each: the
// simrd profile on a 1.6 MB DTR log took 2,300 page faults, a quarter of its run
// (docs/performance.md). Only advice: where the kernel declines, nothing changes but speed.
void prefer_huge_pages_for_heap();

}  // namespace coopsim
