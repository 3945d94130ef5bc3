// Inputs that libFuzzer found to break a reader (tests/fuzz/README.md), kept in
// tests/fuzz/corpus/<target>/regress_*, each with its exact outcome now. The fuzz-replay tests
// run the same files through the harnesses' oracles; these name what each one must give.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <string>

#include "coopsim/base/error.hpp"
#include "coopsim/replay/replay_plan.hpp"
#include "coopsim/import/importers.hpp"
#include "coopsim/sim/simulation.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "test_paths.hpp"

using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace fuzz_regressions_test {

namespace {

const std::string kCorpus = "tests/fuzz/corpus/";

}  // namespace

TEST_CASE("fuzz regression: a snapshot action holding a newline stays on one line", "[fuzz]") {
  // The action string "0\ngment_alloc" was quoted raw: the message spanned two lines.
  const std::string p = kCorpus + "pickle/regress_action_with_newline.pickle";
  CHECK_THROWS_WITH(import_torch_snapshot(p, {}),
                    p + ": device_traces[0][0].action: unknown action '0\\x0agment_alloc' (known: alloc, "
                        "free_requested, free_completed, segment_alloc, segment_free, segment_map, segment_unmap, "
                        "snapshot, oom, annotate)");
}

TEST_CASE("fuzz regression: a DEL byte in a DTR line's JSON error is escaped", "[fuzz]") {
  // nlohmann's "last read" token carried the raw 0x7F byte into the message.
  const std::string p = kCorpus + "dtr/regress_del_in_json_error.log";
  CHECK_THROWS_WITH(import_dtr_log(p), p + ":2: malformed JSON: column 37: syntax error while parsing object - "
                                           "invalid literal; last read: '\"p\"\\x7f'; expected '}'");
}

TEST_CASE("fuzz regression: a snapshot freeing more bytes than its end-state block imports as a valid trace",
          "[fuzz]") {
  // The history's free_requested at 0x7f0000000000 names 4 MiB; the end state's block there has
  // 1024 bytes. The initial state placed a 4 MiB tensor in the 1024-byte block, and the trace
  // written from it did not load. The tensor now takes the block's size, with a note.
  const std::string p = kCorpus + "pickle/regress_initial_block_smaller_than_tensor.pickle";
  const Trace t = import_torch_snapshot(p, {});
  REQUIRE(t.initial_segments.size() == 1);
  CHECK(t.initial_segments[0].blocks.at(0).size.value == 1024);
  CHECK(t.tensors.at(index_of(t.initial_segments[0].blocks[0].tensor)).size.value == 1024);
  CHECK(t.header.source.at("initial_state") == "approximate");
  CHECK(t.header.source.at("notes").back() ==
        "the pre-existing block at 0x7f0000000000 has 1024 bytes, fewer than the 4194304 requested of it");
  const auto dir = test::scratch_dir("fuzz-regressions");
  write_trace(t, (dir / "t.jsonl").string());
  CHECK(load_trace((dir / "t.jsonl").string()).tensors == t.tensors);
}

TEST_CASE("fuzz regression: a second free of an address in a snapshot's history is refused", "[fuzz]") {
  // Entry 18 frees 0x7f0000001c00 again after entries 9 and 10 freed it, with no alloc between:
  // it became a second block "live before the recording" at that address, and the initial state
  // got an empty block that the written trace could not hold.
  const std::string p = kCorpus + "pickle/regress_second_free_of_an_address.pickle";
  CHECK_THROWS_WITH(import_torch_snapshot(p, {}),
                    p + ": device_traces[0][18]: free_requested at 0x7f0000001c00, which is not allocated (the "
                        "history freed it and did not allocate it again)");
}

TEST_CASE("fuzz regression: numbers beyond a double are bad input, not internal errors", "[fuzz]") {
  // nlohmann::json throws out_of_range (not parse_error) for 1e999; the readers caught only
  // parse_error, so the CLI ended with "internal error" (exit 70).
  const std::string plan = kCorpus + "plan/regress_number_overflow.plan.json";
  std::ifstream in(plan, std::ios::binary);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  CHECK_THROWS_WITH(gpu::parse_plan(text, "p.plan.json"),
                    "p.plan.json:8: invalid JSON: number overflow parsing '3e60000'");
  const std::string cfg = kCorpus + "config/regress_number_overflow.json";
  CHECK_THROWS_WITH(load_config(cfg), cfg + ":3: invalid JSON: number overflow parsing '1e999'");
  const std::string limits = kCorpus + "config/regress_number_overflow_in_limits.json";
  CHECK_THROWS_WITH(load_config(limits), limits + ":1: invalid JSON: number overflow parsing '7e330'");
  const std::string dtr = kCorpus + "dtr/regress_number_overflow.log";
  CHECK_THROWS_WITH(import_dtr_log(dtr), dtr + ":2: malformed JSON: number overflow parsing '-1e400'");
  const std::string trace = kCorpus + "trace/regress_number_overflow_header.jsonl";
  CHECK_THROWS_WITH(load_trace(trace), trace + ":1: malformed JSON: number overflow parsing '1e999'");
}

TEST_CASE("fuzz regression: a NaN in a snapshot's allocator settings becomes null in the header", "[fuzz]") {
  // allocator_settings.garbage_collec~ion_threshold is nan: the header held a NaN, which JSON
  // writes as null, so the trace read back differed from the one imported.
  const std::string p = kCorpus + "pickle/regress_nan_in_allocator_settings.pickle";
  const Trace t = import_torch_snapshot(p, {});
  CHECK(t.header.extra.at("allocator_settings").at("garbage_collec~ion_threshold").is_null());
  const auto dir = test::scratch_dir("fuzz-regressions-nan");
  write_trace(t, (dir / "t.jsonl").string());
  CHECK(load_trace((dir / "t.jsonl").string()).header == t.header);
}

}  // namespace fuzz_regressions_test
