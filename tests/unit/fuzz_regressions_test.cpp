// Inputs that libFuzzer found to break a reader (tests/fuzz/README.md), kept in
// tests/fuzz/corpus/<target>/regress_*, each with its exact outcome now. The fuzz-replay tests
// run the same files through the harnesses' oracles; these name what each one must give.
#include <catch2/catch.hpp>

#include <string>

#include "coopsim/error.hpp"
#include "coopsim/import/importers.hpp"

using namespace coopsim;

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
