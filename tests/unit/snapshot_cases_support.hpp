// Helpers of the snapshot-cases suite (tests/unit/snapshot_cases_test.cpp,
// tests/unit/snapshot_recordings_test.cpp): snapshots written with coopsim's own pickle writer and
// read back by the importer, and replays with the `pytorch` model.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "coopsim/formats/pickle_writer.hpp"
#include "coopsim/alloc/pytorch.hpp"
#include "coopsim/engine/engine.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/import/torch_snapshot.hpp"
#include "coopsim/policy/keep.hpp"
#include "torch_snapshot_test_support.hpp"

namespace snapshot_cases {

using namespace coopsim;
using namespace snapshot_test;

inline constexpr std::uint64_t KiB = 1ULL << 10;
inline constexpr std::uint64_t A = 0x10000000;      // a cudaMalloc'd large-pool segment
inline constexpr std::uint64_t R = 0x7e0000000000;  // an expandable large-pool reservation
inline constexpr std::uint64_t Q = 0x7c0000000000;  // an expandable small-pool reservation

// The snapshot dict through coopsim's pickle writer (floats must be whole: the writer has ints).
inline void write(pickle::Writer& w, const Value& v) {
  switch (v.kind) {
    case Kind::Dict:
      w.begin_dict();
      for (const auto& [k, x] : v.entries) {
        write(w, *k);
        write(w, *x);
      }
      w.end();
      break;
    case Kind::List:
      w.begin_list();
      for (const auto& x : v.items) write(w, *x);
      w.end();
      break;
    case Kind::Tuple:
      REQUIRE(v.items.size() == 2);
      w.int_pair(v.items[0]->integer, v.items[1]->integer);
      break;
    case Kind::Int: w.integer(v.integer); break;
    case Kind::Bool: w.boolean(v.boolean); break;
    case Kind::String: w.text(v.text); break;
    case Kind::Float:
      REQUIRE(std::floor(v.real) == v.real);
      w.integer(static_cast<std::int64_t>(v.real));
      break;
    default: FAIL("value kind the pickle writer does not write");
  }
}

// The same trace, field by field (segment addresses compared by their records' parts).
inline void require_same(const Trace& a, const Trace& b) {
  REQUIRE(a.header == b.header);
  REQUIRE(a.tensors == b.tensors);
  REQUIRE(a.events == b.events);
  REQUIRE(a.labels == b.labels);
  REQUIRE(a.initial_segments == b.initial_segments);
  REQUIRE(a.segment_addresses.size() == b.segment_addresses.size());
  for (std::size_t i = 0; i < a.segment_addresses.size(); ++i) {
    const SegmentAddress &x = a.segment_addresses[i], &y = b.segment_addresses[i];
    REQUIRE((x.addr == y.addr && x.size == y.size && x.stream == y.stream && x.pool == y.pool &&
             x.expandable == y.expandable));
  }
}

// Imported from the parsed tree and, as files are, streamed: both must give the same trace.
inline Trace import(const Snap& s, int device = 0) {
  pickle::Writer w;
  write(w, *s.build());
  const std::string bytes = w.finish();
  Trace tree = torch_snapshot::import_value(*pickle::parse(bytes, "snap.pickle"), "snap.pickle",
                                            TorchSnapshotOptions{device});
  require_same(tree, torch_snapshot::import_bytes(bytes, "snap.pickle", TorchSnapshotOptions{device}));
  return tree;
}

inline std::string end_difference(const Trace& t, const Replay& r) {
  return torch_snapshot::compare_end_state(*torch_snapshot::final_segments(t), r.end).first_difference;
}

using Layout = std::vector<std::pair<std::uint64_t, std::uint32_t>>;
inline Layout layout(const InitialSegment& s) {
  Layout out;
  for (const auto& b : s.blocks) out.emplace_back(b.size.value, index_of(b.tensor));
  return out;
}

inline ValuePtr expandable_settings() {
  Fields div;
  for (int i = 0; i < 16; ++i) div.emplace_back(std::to_string(1 << i), I(0));
  return D({{"PYTORCH_CUDA_ALLOC_CONF", S("expandable_segments:True")},
            {"max_split_size", I(-1)},
            {"garbage_collection_threshold", F(0.0)},
            {"expandable_segments", B(true)},
            {"roundup_power2_divisions", D(div)}});
}

}  // namespace snapshot_cases
