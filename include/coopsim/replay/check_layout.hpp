// How replay-gpu's op kernel divides a tensor's words among its threads, shared by the kernel
// (src/replay/kernels.cu) and its CPU tests. One rule for reads and writes: the word units of a
// block are numbered, and unit m belongs to thread m mod T (T threads in the grid). A thread checks
// a unit before it writes it, so an in-place op (the same block read and written by one kernel)
// never has a thread read a word another thread already overwrote with the next version. A
// thinned check reads only the words at multiples of the read stride, spread over all threads
// (thinned_checks below).
//
// Units: with sample stride 1 and a 16-byte-aligned block, units 0 .. words/4 - 1 are the 4-word
// quads (16-byte loads and stores) and the words behind the last quad are one unit each; with a
// sample stride s > 1 (or an unaligned block), unit m is the single word m * s (s = 1 unaligned).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define COOPSIM_HOST_DEVICE __host__ __device__
#else
#define COOPSIM_HOST_DEVICE
#endif

namespace coopsim::gpu {

struct CheckLayout {
  std::uint64_t words = 0;   // the block's 4-byte words
  std::uint32_t stride = 1;  // the sample stride: every stride-th word is written and may be read
  bool quads = false;        // 16-byte units over the aligned body

  COOPSIM_HOST_DEVICE static CheckLayout of(std::uint64_t offset, std::uint64_t words, std::uint32_t stride) {
    return CheckLayout{words, stride, stride == 1 && offset % 16 == 0};
  }
  COOPSIM_HOST_DEVICE std::uint64_t body_quads() const { return quads ? words / 4 : 0; }
  COOPSIM_HOST_DEVICE std::uint64_t units() const {
    return quads ? body_quads() + words % 4 : (words + stride - 1) / stride;
  }
  // Words in unit m (4 for a quad, else 1) and its first word.
  COOPSIM_HOST_DEVICE std::uint32_t unit_words(std::uint64_t m) const { return quads && m < body_quads() ? 4 : 1; }
  COOPSIM_HOST_DEVICE std::uint64_t first_word(std::uint64_t m) const {
    if (!quads) return m * stride;
    return m < body_quads() ? 4 * m : 4 * body_quads() + (m - body_quads());
  }
  // A thinned check (read stride > the sample stride, a multiple of it and, over quads, of 4) reads
  // the words at multiples of the read stride: thinned_checks of them, the j-th at thinned_word(j).
  // Each is the first word of a unit, so it was written. The kernel spreads them evenly over its
  // threads instead of walking every unit to skip most (on bilstm's 1 GiB gradient buffers that
  // walk took 140 us per step on an H200), so a checking thread is not the word's writer: an
  // in-place op's check also accepts the version the op writes (DevRef::written_version).
  COOPSIM_HOST_DEVICE std::uint64_t thinned_checks(std::uint32_t read_stride) const {
    return (words + read_stride - 1) / read_stride;
  }
  COOPSIM_HOST_DEVICE static std::uint64_t thinned_word(std::uint64_t j, std::uint32_t read_stride) {
    return j * read_stride;
  }
};

// The thread (of `threads`) that reads and writes unit m.
COOPSIM_HOST_DEVICE inline std::uint64_t unit_owner(std::uint64_t m, std::uint64_t threads) { return m % threads; }

}  // namespace coopsim::gpu
