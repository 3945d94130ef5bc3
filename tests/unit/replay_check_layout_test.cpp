// replay-gpu's division of a block's words among the op kernel's threads (check_layout.hpp): every
// word an unthinned check reads belongs to the thread that writes it, so an in-place op's check
// never sees a word another thread already overwrote. On an H200 a thinned check that read word
// w*stride in thread w mod T while the write went by 16-byte quads raced exactly so (false
// integrity failures at in-place ops such as aten::mul_); a thinned check now reads that way on
// purpose (walking every unit to stay in the owner's thread cost 140 us per step on 1 GiB buffers)
// and accepts the in-place op's written version instead. This pins both rules on every small layout.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "coopsim/replay/check_layout.hpp"

using coopsim::gpu::CheckLayout;
using coopsim::gpu::unit_owner;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace replay_check_layout_test {

namespace {

// word -> thread that writes it, and the words each unit covers, following the kernel's loops.
std::map<std::uint64_t, std::uint64_t> writers(const CheckLayout& l, std::uint64_t threads) {
  std::map<std::uint64_t, std::uint64_t> w;
  for (std::uint64_t m = 0; m < l.units(); ++m) {
    for (std::uint32_t k = 0; k < l.unit_words(m); ++k) {
      const auto [it, fresh] = w.emplace(l.first_word(m) + k, unit_owner(m, threads));
      CHECK(fresh);  // no word belongs to two units
    }
  }
  return w;
}

}  // namespace

TEST_CASE("replay-gpu check layout: units cover the sampled words once; thinned checks read written words") {
  for (const std::uint64_t threads : {1ULL, 3ULL, 8ULL, 13ULL}) {
    for (const std::uint64_t offset : {0ULL, 4ULL, 16ULL, 36ULL}) {
      for (const std::uint32_t stride : {1U, 2U, 3U}) {
        for (std::uint64_t words = 0; words < 70; ++words) {
          const CheckLayout l = CheckLayout::of(offset, words, stride);
          INFO("threads " << threads << " offset " << offset << " stride " << stride << " words " << words);
          CHECK(l.quads == (stride == 1 && offset % 16 == 0));
          const auto w = writers(l, threads);
          // Written: exactly the words at multiples of the sample stride.
          std::set<std::uint64_t> expected;
          for (std::uint64_t x = 0; x < words; x += stride) expected.insert(x);
          std::set<std::uint64_t> got;
          for (const auto& [word, t] : w) got.insert(word);
          CHECK(got == expected);
          // A thinned check reads only written words, one per read stride, word 0 whenever there is one
          // (so a replaced block is always caught).
          for (const std::uint32_t thin : {16U, 32U, 1024U}) {
            const std::uint32_t read_stride = stride * thin;
            std::set<std::uint64_t> want, read;
            for (std::uint64_t x = 0; x < words; ++x) {
              if (x % read_stride == 0) want.insert(x);
            }
            for (std::uint64_t j = 0; j < l.thinned_checks(read_stride); ++j) {
              const std::uint64_t word = CheckLayout::thinned_word(j, read_stride);
              CHECK(w.count(word) == 1);
              read.insert(word);
            }
            CHECK(read == want);
            if (words > 0) CHECK(read.count(0) == 1);
          }
        }
      }
    }
  }
}

}  // namespace replay_check_layout_test
