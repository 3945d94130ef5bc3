// replay-gpu's division of a block's words among the op kernel's threads (check_layout.hpp): every
// word a check reads belongs to the thread that writes it, so an in-place op's check never sees a
// word another thread already overwrote. On an H200 a thinned check that read word w*stride in
// thread w mod T while the write went by 16-byte quads raced exactly so (false integrity failures
// at in-place ops such as aten::mul_); this pins the rule on every small layout.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "coopsim/replay/check_layout.hpp"

using coopsim::gpu::CheckLayout;
using coopsim::gpu::unit_owner;

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

TEST_CASE("replay-gpu check layout: units cover the sampled words once, each read by its writer") {
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
          for (const std::uint32_t thin : {1U, 16U, 32U}) {
            const std::uint32_t read_stride = stride * thin;
            std::uint64_t checked = 0;
            for (std::uint64_t m = 0; m < l.units(); ++m) {
              if (!l.checked(m, read_stride)) continue;
              const std::uint64_t first = l.first_word(m);
              const std::uint32_t n = read_stride == stride ? l.unit_words(m) : 1;
              for (std::uint32_t k = 0; k < n; ++k) {
                ++checked;
                REQUIRE(w.count(first + k) == 1);  // only written words are read
                CHECK(w.at(first + k) == unit_owner(m, threads));
              }
              if (read_stride != stride) CHECK(first % read_stride == 0);
            }
            if (thin == 1) CHECK(checked == expected.size());  // an unthinned check reads every sampled word
            // A thinned check reads word 0 whenever there is one, so a replaced block is always caught.
            if (words > 0) CHECK(checked >= 1);
          }
        }
      }
    }
  }
}
