// Catalogue of malformed trace v1 inputs: each must fail with exactly "file:line: problem".
// The messages are part of the user interface (docs/trace-format.md lists them); a change to
// one is a deliberate change to this file.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "coopsim/base/error.hpp"
#include "coopsim/model/trace.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace trace_catalogue_test {

namespace {

struct Case {
  std::string name;
  std::string text;      // file content
  std::string expected;  // "line: problem" (the file name is prepended)
};

const std::string H = "{\"format\":\"coopsim-trace\",\"version\":1}\n";
// Tensors 7 (4096 bytes) and 8, and op 3 reading 7 and writing 8.
const std::string T7 = "{\"kind\":\"tensor\",\"id\":7,\"bytes\":4096}\n";
const std::string T8 = "{\"kind\":\"tensor\",\"id\":8,\"bytes\":4096}\n";
const std::string OP3 = "{\"kind\":\"op\",\"id\":3,\"inputs\":[7],\"outputs\":[8]}\n";
// Op 3 declaring 8 a view of 7.
const std::string VIEW = "{\"kind\":\"op\",\"id\":3,\"inputs\":[7],\"outputs\":[8],\"views\":[[8,7]]}\n";

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string load_error(const std::string& path) {
  try {
    (void)load_trace(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(loaded without error)";
}

void run_cases(const std::string& group, const std::vector<Case>& cases) {
  const fs::path dir = test::scratch_dir("catalogue-" + group);
  for (const Case& c : cases) {
    const fs::path p = dir / (c.name + ".jsonl");
    write_file(p, c.text);
    INFO("case " << c.name);
    CHECK(load_error(p.string()) == p.string() + ":" + c.expected);
  }
}

}  // namespace

TEST_CASE("catalogue: JSON syntax and line shape", "[catalogue]") {
  run_cases(
      "syntax",
      {
          {"not_json", H + "{kind:tensor}\n", "2: malformed JSON: expected a key string at column 2"},
          {"truncated_last_line", H + T7 + "{\"kind\":\"alloc\",\"tens",
           "3: malformed JSON: unterminated string at column 22 (last line has no newline: truncated file?)"},
          {"truncated_number", H + T7 + "{\"kind\":\"alloc\",\"tensor\":",
           "3: malformed JSON: unexpected end of line at column 26 (last line has no newline: truncated file?)"},
          {"not_an_object", H + "[1,2]\n", "2: line is not a JSON object"},
          {"string_line", H + "\"tensor\"\n", "2: line is not a JSON object"},
          {"duplicate_key", H + "{\"kind\":\"tensor\",\"id\":1,\"id\":2,\"bytes\":4}\n", "2: duplicate key 'id'"},
          {"trailing_text", H + "{\"kind\":\"mark\",\"label\":\"a\"} x\n",
           "2: malformed JSON: unexpected text after the object at column 29"},
          {"two_objects", H + "{\"kind\":\"mark\",\"label\":\"a\"}{\"kind\":\"mark\",\"label\":\"b\"}\n",
           "2: malformed JSON: unexpected text after the object at column 28"},
          {"trailing_comma", H + "{\"kind\":\"mark\",\"label\":\"a\",}\n",
           "2: malformed JSON: expected a key string at column 28"},
          {"bad_escape", H + "{\"kind\":\"mark\",\"label\":\"a\\q\"}\n",
           "2: malformed JSON: invalid escape in string at column 26"},
          {"lone_surrogate", H + "{\"kind\":\"mark\",\"label\":\"\\ud800x\"}\n",
           "2: malformed JSON: unpaired surrogate in \\u escape at column 25"},
          {"control_char", H + "{\"kind\":\"mark\",\"label\":\"a\tb\"}\n",
           "2: malformed JSON: control character in string at column 26"},
          {"invalid_utf8", H + "{\"kind\":\"mark\",\"label\":\"caf\xe9\"}\n",
           "2: malformed JSON: invalid UTF-8 in string at column 28"},
          {"leading_zero", H + "{\"kind\":\"tensor\",\"id\":07,\"bytes\":4}\n",
           "2: malformed JSON: expected ',' or '}' at column 24"},
          {"bad_literal", H + "{\"kind\":\"op\",\"id\":1,\"random\":True}\n",
           "2: malformed JSON: expected a value at column 30"},
          {"deep_nesting",
           H + "{\"kind\":\"mark\",\"label\":\"a\",\"x_deep\":" + std::string(600, '[') + std::string(600, ']') + "}\n",
           "2: malformed JSON: nesting too deep at column 548"},
          {"binary_garbage",
           std::string("\x7f"
                       "ELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0>\0\n\xff\xfe",
                       24),
           "1: malformed JSON: expected a value at column 1"},
      });
}

TEST_CASE("catalogue: header", "[catalogue]") {
  run_cases(
      "header",
      {
          {"empty_file", "", "1: empty trace: no header line"},
          {"blank_file", "\n  \n", "3: empty trace: no header line"},
          {"missing_header", T7,
           "1: missing header: the first line must be the {\"format\":\"coopsim-trace\",\"version\":1,...} object"},
          {"header_not_first", H + T7 + H,
           "3: unexpected header: the header must be the first line and appear only once"},
          {"wrong_format", "{\"format\":\"chrome-trace\",\"version\":1}\n",
           "1: unknown format 'chrome-trace' (expected 'coopsim-trace')"},
          {"format_not_string", "{\"format\":1,\"version\":1}\n", "1: header: field 'format' must be a string (got 1)"},
          {"missing_version", "{\"format\":\"coopsim-trace\"}\n", "1: header: missing field 'version'"},
          {"version_string", "{\"format\":\"coopsim-trace\",\"version\":\"1\"}\n",
           "1: header: field 'version' must be an integer (got '1')"},
          {"unsupported_version", "{\"format\":\"coopsim-trace\",\"version\":2}\n",
           "1: unsupported trace version 2 (this build reads version 1)"},
          {"bad_time_unit", "{\"format\":\"coopsim-trace\",\"version\":1,\"time_unit\":\"min\"}\n",
           "1: header: field 'time_unit' must be one of ns, us, ms, s (got 'min')"},
          {"zero_iterations", "{\"format\":\"coopsim-trace\",\"version\":1,\"iterations\":0}\n",
           "1: header: field 'iterations' must be an integer in [1, 4294967295] (got 0)"},
          {"fractional_iterations", "{\"format\":\"coopsim-trace\",\"version\":1,\"iterations\":1.5}\n",
           "1: header: field 'iterations' must be an integer in [1, 4294967295] (got 1.5)"},
          {"model_not_string", "{\"format\":\"coopsim-trace\",\"version\":1,\"model\":5}\n",
           "1: header: field 'model' must be a string (got 5)"},
          {"source_not_object", "{\"format\":\"coopsim-trace\",\"version\":1,\"source\":\"gen\"}\n",
           "1: header: field 'source' must be an object (got 'gen')"},
      });
}

TEST_CASE("catalogue: record shape", "[catalogue]") {
  run_cases(
      "records",
      {
          {"missing_kind", H + "{\"id\":7,\"bytes\":4096}\n", "2: record: missing field 'kind'"},
          {"kind_not_string", H + "{\"kind\":5}\n", "2: record: field 'kind' must be a string (got 5)"},
          {"unknown_kind", H + "{\"kind\":\"allocate\",\"tensor\":7}\n",
           "2: unknown record kind 'allocate' (expected tensor, op, alloc, free, access, compute, iteration, mark, "
           "segment or segment_address)"},
          {"typo_key", H + "{\"kind\":\"tensor\",\"id\":7,\"bytse\":4096}\n",
           "2: tensor record: unknown key 'bytse' (extension keys must start with x_)"},
          {"key_of_other_kind", H + T7 + "{\"kind\":\"free\",\"tensor\":7,\"addr\":64}\n",
           "3: free record: unknown key 'addr' (extension keys must start with x_)"},
          {"missing_id", H + "{\"kind\":\"tensor\",\"bytes\":4096}\n", "2: tensor record: missing field 'id'"},
          {"id_string", H + "{\"kind\":\"tensor\",\"id\":\"7\",\"bytes\":4096}\n",
           "2: tensor record: field 'id' must be a non-negative integer (got '7')"},
          {"id_negative", H + "{\"kind\":\"op\",\"id\":-1}\n",
           "2: op record: field 'id' must be a non-negative integer (got -1)"},
          {"id_too_large", H + "{\"kind\":\"op\",\"id\":18446744073709551616}\n",
           "2: op record: field 'id' must be a non-negative integer (got 18446744073709551616)"},
          {"missing_bytes", H + "{\"kind\":\"tensor\",\"id\":7}\n", "2: tensor 7: missing field 'bytes'"},
      });
}

TEST_CASE("catalogue: tensor and op definitions", "[catalogue]") {
  run_cases(
      "definitions",
      {
          {"duplicate_tensor", H + T7 + "\n" + T7, "4: duplicate tensor id 7 (first defined at line 2)"},
          {"duplicate_op", H + T7 + T8 + OP3 + OP3, "5: duplicate op id 3 (first defined at line 4)"},
          {"negative_size", H + "{\"kind\":\"tensor\",\"id\":7,\"bytes\":-5}\n",
           "2: tensor 7: field 'bytes' must be an integer in [0, 2^53] (got -5)"},
          {"fractional_size", H + "{\"kind\":\"tensor\",\"id\":7,\"bytes\":4096.5}\n",
           "2: tensor 7: field 'bytes' must be an integer in [0, 2^53] (got 4096.5)"},
          {"size_too_large", H + "{\"kind\":\"tensor\",\"id\":7,\"bytes\":9007199254740993}\n",
           "2: tensor 7: field 'bytes' must be an integer in [0, 2^53] (got 9007199254740993)"},
          {"size_as_string", H + "{\"kind\":\"tensor\",\"id\":7,\"bytes\":\"4KiB\"}\n",
           "2: tensor 7: field 'bytes' must be an integer in [0, 2^53] (got '4KiB')"},
          {"zero_size_alloc", H + "{\"kind\":\"tensor\",\"id\":7,\"bytes\":0}\n{\"kind\":\"alloc\",\"tensor\":7}\n",
           "3: alloc of tensor 7 with 0 bytes (only views may have 0 bytes)"},
          {"unknown_role", H + "{\"kind\":\"tensor\",\"id\":7,\"bytes\":4,\"role\":\"weights\"}\n",
           "2: tensor 7: field 'role' must be one of parameter, input, activation, gradient, optimizer_state, "
           "workspace, other (got 'weights')"},
          {"name_not_string", H + "{\"kind\":\"tensor\",\"id\":7,\"bytes\":4,\"name\":[1]}\n",
           "2: tensor 7: field 'name' must be a string (got an array)"},
          {"op_undefined_input", H + T7 + "{\"kind\":\"op\",\"id\":3,\"inputs\":[7,99]}\n",
           "3: op 3: inputs refers to undefined tensor 99"},
          {"op_undefined_output", H + T7 + "{\"kind\":\"op\",\"id\":3,\"outputs\":[8]}\n",
           "3: op 3: outputs refers to undefined tensor 8"},
          {"op_inputs_not_array", H + T7 + "{\"kind\":\"op\",\"id\":3,\"inputs\":7}\n",
           "3: op 3: field 'inputs' must be an array of tensor ids (got 7)"},
          {"op_inputs_bad_element", H + T7 + "{\"kind\":\"op\",\"id\":3,\"inputs\":[7,\"x\"]}\n",
           "3: op 3: field 'inputs' must be an array of tensor ids (element 1 is 'x')"},
          {"negative_duration", H + "{\"kind\":\"op\",\"id\":3,\"duration\":-5}\n",
           "2: op 3: field 'duration' must be a non-negative number (got -5)"},
          {"duration_overflow",
           "{\"format\":\"coopsim-trace\",\"version\":1,\"time_unit\":\"s\"}\n"
           "{\"kind\":\"op\",\"id\":3,\"duration\":1e10}\n",
           "2: op 3: field 'duration' is too large (1e10 s overflows 64-bit nanoseconds)"},
          {"duration_string", H + "{\"kind\":\"op\",\"id\":3,\"duration\":\"1ms\"}\n",
           "2: op 3: field 'duration' must be a non-negative number (got '1ms')"},
          {"mutates_non_input", H + T7 + T8 + "{\"kind\":\"op\",\"id\":3,\"inputs\":[7],\"mutates\":[8]}\n",
           "4: op 3: mutates tensor 8, which is not an input of the op"},
          {"random_not_bool", H + "{\"kind\":\"op\",\"id\":3,\"random\":1}\n",
           "2: op 3: field 'random' must be true or false (got 1)"},
      });
}

TEST_CASE("catalogue: views", "[catalogue]") {
  const std::string T9 = "{\"kind\":\"tensor\",\"id\":9,\"bytes\":4096}\n";
  run_cases(
      "views",
      {
          {"views_not_pairs",
           H + T7 + T8 + "{\"kind\":\"op\",\"id\":3,\"inputs\":[7],\"outputs\":[8],\"views\":[[8]]}\n",
           "4: op 3: field 'views' must be an array of [output, input] tensor id pairs (element 0 is [8])"},
          {"views_not_array", H + T7 + T8 + "{\"kind\":\"op\",\"id\":3,\"inputs\":[7],\"outputs\":[8],\"views\":8}\n",
           "4: op 3: field 'views' must be an array of [output, input] tensor id pairs (got 8)"},
          {"views_undefined",
           H + T7 + T8 + "{\"kind\":\"op\",\"id\":3,\"inputs\":[7],\"outputs\":[8],\"views\":[[9,7]]}\n",
           "4: op 3: views refers to undefined tensor 9"},
          {"view_not_output", H + T7 + T8 + "{\"kind\":\"op\",\"id\":3,\"inputs\":[7,8],\"views\":[[8,7]]}\n",
           "4: op 3: view pair [8, 7]: tensor 8 is not an output of the op"},
          {"view_base_not_input", H + T7 + T8 + "{\"kind\":\"op\",\"id\":3,\"outputs\":[7,8],\"views\":[[8,7]]}\n",
           "4: op 3: view pair [8, 7]: tensor 7 is not an input of the op"},
          {"view_of_itself", H + T8 + "{\"kind\":\"op\",\"id\":3,\"inputs\":[8],\"outputs\":[8],\"views\":[[8,8]]}\n",
           "3: op 3: view pair [8, 8]: tensor 8 would become a view of itself"},
          {"view_already_allocated", H + T7 + T8 + "{\"kind\":\"alloc\",\"tensor\":8}\n" + VIEW,
           "5: op 3: view pair [8, 7]: tensor 8 was already allocated (line 4)"},
          {"view_of_two_bases",
           H + T7 + T8 + T9 + VIEW + "{\"kind\":\"op\",\"id\":4,\"inputs\":[9],\"outputs\":[8],\"views\":[[8,9]]}\n",
           "6: op 4: view pair [8, 9]: tensor 8 is already a view of tensor 7"},
          {"base_becomes_view",
           H + T7 + T8 + T9 + VIEW + "{\"kind\":\"op\",\"id\":4,\"inputs\":[9],\"outputs\":[7],\"views\":[[7,9]]}\n",
           "6: op 4: view pair [7, 9]: tensor 7 is the base of other views"},
          {"view_cycle",
           H + T7 + T8 + VIEW + "{\"kind\":\"op\",\"id\":4,\"inputs\":[8],\"outputs\":[7],\"views\":[[7,8]]}\n",
           "5: op 4: view pair [7, 8]: tensor 7 would become a view of itself"},
          {"alloc_of_view", H + T7 + T8 + VIEW + "{\"kind\":\"alloc\",\"tensor\":8}\n",
           "5: alloc of view tensor 8 (views share the storage of tensor 7)"},
          {"free_of_view", H + T7 + T8 + VIEW + "{\"kind\":\"alloc\",\"tensor\":7}\n{\"kind\":\"free\",\"tensor\":8}\n",
           "6: free of view tensor 8 (views share the storage of tensor 7)"},
          {"view_use_after_free",
           H + T7 + T8 + VIEW +
               "{\"kind\":\"alloc\",\"tensor\":7}\n{\"kind\":\"free\",\"tensor\":7}\n"
               "{\"kind\":\"access\",\"tensor\":8,\"mode\":\"read\"}\n",
           "7: use after free: access of tensor 8 (view of tensor 7, freed at line 6)"},
          {"view_use_before_alloc", H + T7 + T8 + VIEW + "{\"kind\":\"access\",\"tensor\":8,\"mode\":\"write\"}\n",
           "5: use before allocation: access of tensor 8 (view of tensor 7)"},
      });
}

TEST_CASE("catalogue: events", "[catalogue]") {
  const std::string A7 = "{\"kind\":\"alloc\",\"tensor\":7}\n";
  const std::string F7 = "{\"kind\":\"free\",\"tensor\":7}\n";
  const std::string A8 = "{\"kind\":\"alloc\",\"tensor\":8}\n";
  run_cases(
      "events",
      {
          {"alloc_undefined", H + "{\"kind\":\"alloc\",\"tensor\":99}\n", "2: alloc of undefined tensor 99"},
          {"free_undefined", H + "{\"kind\":\"free\",\"tensor\":99}\n", "2: free of undefined tensor 99"},
          {"access_undefined", H + "{\"kind\":\"access\",\"tensor\":99,\"mode\":\"read\"}\n",
           "2: access of undefined tensor 99"},
          {"compute_undefined", H + "{\"kind\":\"compute\",\"op\":42}\n", "2: compute of undefined op 42"},
          {"access_by_undefined_op", H + T7 + A7 + "{\"kind\":\"access\",\"tensor\":7,\"mode\":\"read\",\"op\":42}\n",
           "4: access by undefined op 42"},
          {"alloc_missing_tensor", H + "{\"kind\":\"alloc\",\"t\":5}\n", "2: alloc record: missing field 'tensor'"},
          {"alloc_twice", H + T7 + A7 + "\n" + A7, "5: alloc of tensor 7, which is already live (allocated at line 3)"},
          {"double_free", H + T7 + A7 + F7 + F7, "5: double free of tensor 7 (already freed at line 4)"},
          {"free_never_allocated", H + T7 + F7, "3: free of tensor 7, which was never allocated"},
          {"use_after_free", H + T7 + A7 + F7 + "{\"kind\":\"access\",\"tensor\":7,\"mode\":\"read\"}\n",
           "5: use after free: access of tensor 7 (freed at line 4)"},
          {"use_before_alloc", H + T7 + "{\"kind\":\"access\",\"tensor\":7,\"mode\":\"read\"}\n",
           "3: use before allocation: access of tensor 7"},
          {"compute_input_freed", H + T7 + T8 + OP3 + A7 + A8 + F7 + "{\"kind\":\"compute\",\"op\":3}\n",
           "8: use after free: compute of op 3 reads tensor 7 (freed at line 7)"},
          {"compute_output_unallocated", H + T7 + T8 + OP3 + A7 + "{\"kind\":\"compute\",\"op\":3}\n",
           "6: use before allocation: compute of op 3 writes tensor 8"},
          {"bad_mode", H + T7 + A7 + "{\"kind\":\"access\",\"tensor\":7,\"mode\":\"rw\"}\n",
           "4: access record: field 'mode' must be 'read' or 'write' (got 'rw')"},
          {"missing_mode", H + T7 + A7 + "{\"kind\":\"access\",\"tensor\":7}\n",
           "4: access record: missing field 'mode'"},
          {"time_backwards",
           H + T7 +
               "{\"kind\":\"alloc\",\"tensor\":7,\"t\":120}\n{\"kind\":\"mark\",\"label\":\"x\"}\n"
               "{\"kind\":\"free\",\"tensor\":7,\"t\":100}\n",
           "5: timestamp 100 goes backwards (previous timestamp 120 at line 3)"},
          {"time_backwards_fraction",
           "{\"format\":\"coopsim-trace\",\"version\":1,\"time_unit\":\"ms\"}\n" + T7 +
               "{\"kind\":\"alloc\",\"tensor\":7,\"t\":1.5}\n"
               "{\"kind\":\"free\",\"tensor\":7,\"t\":1.4999}\n",
           "4: timestamp 1.4999 goes backwards (previous timestamp 1.5 at line 3)"},
          {"negative_time", H + "{\"kind\":\"mark\",\"label\":\"x\",\"t\":-1}\n",
           "2: mark record: field 't' must be a non-negative number (got -1)"},
          {"time_overflow", H + "{\"kind\":\"mark\",\"label\":\"x\",\"t\":9223372036854775808}\n",
           "2: mark record: field 't' is too large (9223372036854775808 ns overflows 64-bit nanoseconds)"},
          {"stream_out_of_range", H + T7 + "{\"kind\":\"alloc\",\"tensor\":7,\"stream\":70000}\n",
           "3: alloc record: field 'stream' must be an integer in [0, 65535] (got 70000)"},
          {"addr_negative", H + T7 + "{\"kind\":\"alloc\",\"tensor\":7,\"addr\":-4096}\n",
           "3: alloc record: field 'addr' must be a non-negative integer (got -4096)"},
          {"mark_without_label", H + "{\"kind\":\"mark\"}\n", "2: mark record: missing field 'label'"},
      });
}

TEST_CASE("catalogue: initial state records", "[catalogue]") {
  // Tensor 7 (4096 bytes) live from the start in a 2 MiB small-pool segment at 1048576.
  const std::string SEG =
      "{\"kind\":\"segment\",\"addr\":1048576,\"size\":2097152,\"pool\":\"small\",\"blocks\":"
      "[{\"size\":4096,\"tensor\":7},{\"size\":2093056,\"free\":true}]}\n";
  auto seg = [](const std::string& rest) { return "{\"kind\":\"segment\",\"addr\":1048576," + rest + "}\n"; };
  const std::string A7 = "{\"kind\":\"alloc\",\"tensor\":7}\n";
  run_cases(
      "initial",
      {
          {"segment_after_event", H + T7 + T8 + "{\"kind\":\"alloc\",\"tensor\":8}\n" + SEG,
           "5: segment 1048576: segment records (the initial state) must come before every event"},
          {"segment_missing_addr", H + "{\"kind\":\"segment\",\"size\":512,\"pool\":\"small\",\"blocks\":[]}\n",
           "2: segment record: missing field 'addr'"},
          {"segment_missing_pool", H + seg("\"size\":512,\"blocks\":[{\"size\":512,\"free\":true}]"),
           "2: segment record: missing field 'pool'"},
          {"segment_bad_pool", H + seg("\"size\":512,\"pool\":\"huge\",\"blocks\":[{\"size\":512,\"free\":true}]"),
           "2: segment record: field 'pool' must be 'small' or 'large' (got 'huge')"},
          {"segment_zero_size", H + seg("\"size\":0,\"pool\":\"small\",\"blocks\":[]"),
           "2: segment 1048576: field 'size' must be a positive integer (got 0)"},
          {"segment_no_blocks", H + seg("\"size\":512,\"pool\":\"small\",\"blocks\":[]"),
           "2: segment 1048576: field 'blocks' must be a non-empty array of blocks (got an array)"},
          {"block_not_object", H + seg("\"size\":512,\"pool\":\"small\",\"blocks\":[512]"),
           "2: segment 1048576: block 0 must be an object (got 512)"},
          {"block_unknown_key", H + seg("\"size\":512,\"pool\":\"small\",\"blocks\":[{\"size\":512,\"fre\":true}]"),
           "2: segment 1048576: block 0: unknown key 'fre' (extension keys must start with x_)"},
          {"block_duplicate_key", H + seg("\"size\":512,\"pool\":\"small\",\"blocks\":[{\"size\":512,\"size\":512}]"),
           "2: segment 1048576: block 0: duplicate key 'size'"},
          {"block_neither", H + seg("\"size\":512,\"pool\":\"small\",\"blocks\":[{\"size\":512}]"),
           "2: segment 1048576: block 0: needs exactly one of 'tensor' and \"free\":true"},
          {"block_free_false", H + seg("\"size\":512,\"pool\":\"small\",\"blocks\":[{\"size\":512,\"free\":false}]"),
           "2: segment 1048576: block 0: field 'free' must be true (got false)"},
          {"block_zero", H + seg("\"size\":512,\"pool\":\"small\",\"blocks\":[{\"size\":0,\"free\":true}]"),
           "2: segment 1048576: block 0: field 'size' must be a positive integer (got 0)"},
          {"block_undefined_tensor",
           H + seg("\"size\":4096,\"pool\":\"small\",\"blocks\":[{\"size\":4096,\"tensor\":9}]"),
           "2: segment 1048576: block 0 refers to undefined tensor 9"},
          {"block_too_small",
           H + T7 + seg("\"size\":2048,\"pool\":\"small\",\"blocks\":[{\"size\":2048,\"tensor\":7}]"),
           "3: segment 1048576: block 0 of 2048 bytes is smaller than tensor 7 (4096 bytes)"},
          {"block_view",
           H + T7 + T8 + VIEW + seg("\"size\":4096,\"pool\":\"small\",\"blocks\":[{\"size\":4096,\"tensor\":8}]"),
           "5: segment 1048576: block 0: tensor 8 is a view (views share the storage of tensor 7)"},
          {"tensor_twice",
           H + T7 +
               seg("\"size\":8192,\"pool\":\"small\",\"blocks\":[{\"size\":4096,\"tensor\":7},"
                   "{\"size\":4096,\"tensor\":7}]"),
           "3: segment 1048576: block 1: tensor 7 is already live (allocated at line 3)"},
          {"blocks_short", H + seg("\"size\":4096,\"pool\":\"small\",\"blocks\":[{\"size\":512,\"free\":true}]"),
           "2: segment 1048576: blocks cover 512 bytes, field 'size' says 4096"},
          {"segments_overlap",
           H + T7 + SEG +
               "{\"kind\":\"segment\",\"addr\":2097152,\"size\":512,\"pool\":\"large\","
               "\"blocks\":[{\"size\":512,\"free\":true}]}\n",
           "4: segment 2097152: overlaps segment 1048576 (line 3)"},
          {"alloc_of_initial_tensor", H + T7 + SEG + A7,
           "4: alloc of tensor 7, which is already live (allocated at line 3)"},
          {"address_missing_pool", H + "{\"kind\":\"segment_address\",\"addr\":1,\"size\":512}\n",
           "2: segment_address record: missing field 'pool'"},
          {"address_zero_size", H + "{\"kind\":\"segment_address\",\"addr\":1,\"size\":0,\"pool\":\"large\"}\n",
           "2: segment_address record: field 'size' must be a positive integer (got 0)"},
      });
}

TEST_CASE("catalogue: iterations and end of file", "[catalogue]") {
  const std::string H2 = "{\"format\":\"coopsim-trace\",\"version\":1,\"iterations\":2}\n";
  const std::string I0 = "{\"kind\":\"iteration\",\"index\":0}\n";
  const std::string I1 = "{\"kind\":\"iteration\",\"index\":1}\n";
  run_cases("iterations",
            {
                {"iteration_out_of_order", H2 + I1, "2: iteration index 1 out of order (expected 0)"},
                {"iteration_repeated", H2 + I0 + I0, "3: iteration index 0 out of order (expected 1)"},
                {"iteration_beyond_header", H + I0 + I1,
                 "3: iteration index 1 exceeds the 1 iterations declared in the header"},
                {"iteration_index_fraction", H2 + "{\"kind\":\"iteration\",\"index\":0.5}\n",
                 "2: iteration record: field 'index' must be a non-negative integer (got 0.5)"},
                {"ends_early", H2 + I0 + "{\"kind\":\"mark\",\"label\":\"x\"}\n",
                 "4: trace ends after 1 of 2 iterations (truncated?)"},
                {"no_iteration_records", H2 + T7 + "\n", "4: trace ends after 0 of 2 iterations (truncated?)"},
            });
}

TEST_CASE("catalogue: gzip damage and unreadable files", "[catalogue]") {
  const fs::path dir = test::scratch_dir("catalogue-gzip");
  // A valid compressed trace of 51 lines.
  const fs::path good = dir / "good.jsonl.gz";
  write_trace(load_trace("tests/data/traces/small_v1.jsonl"), good.string());
  const std::string gz = read_file(good);
  REQUIRE(gz.size() > 40);

  SECTION("truncated: the 8-byte trailer (CRC, size) is missing") {
    const fs::path p = dir / "no_trailer.jsonl.gz";
    write_file(p, gz.substr(0, gz.size() - 8));
    CHECK(load_error(p.string()) == p.string() + ":51: gzip stream is truncated (unexpected end of compressed data)");
  }
  SECTION("truncated in the middle of the data") {
    const fs::path p = dir / "half.jsonl.gz";
    write_file(p, gz.substr(0, gz.size() / 2));
    const std::string e = load_error(p.string());
    CHECK(e.find(": gzip stream is truncated (unexpected end of compressed data)") != std::string::npos);
  }
  SECTION("corrupt: invalid deflate block type after a valid gzip header") {
    const fs::path p = dir / "corrupt.jsonl.gz";
    write_file(p, std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x07garbage", 17));
    CHECK(load_error(p.string()) == p.string() + ":1: gzip stream is corrupt: invalid block type");
  }
  SECTION("a line longer than 64 MiB") {
    const fs::path p = dir / "long_line.jsonl";
    write_file(p, H + "{\"kind\":\"mark\",\"label\":\"" + std::string((64U << 20) + 16, 'a') + "\"}\n");
    CHECK(load_error(p.string()) == p.string() + ":2: line is longer than 64 MiB");
    fs::remove(p);
  }
  SECTION("missing file") {
    const std::string p = (dir / "does-not-exist.jsonl").string();
    CHECK(load_error(p) == p + ":0: cannot open trace file: No such file or directory");
  }
}

}  // namespace trace_catalogue_test
