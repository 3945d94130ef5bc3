// DTR log importer: hand-written logs (tests/data/dtr/) converted in both MUTATE modes and
// checked against expectations worked out by hand from DTR's rules (docs/import-dtr.md,
// simrd's parse.py), replayed, written and loaded back; plus a catalogue of malformed logs with
// their exact messages.
#include <catch2/catch.hpp>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "coopsim/cli/commands.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/import/importers.hpp"
#include "coopsim/sim/simulation.hpp"
#include "coopsim/model/trace.hpp"
#include "coopsim/formats/trace_file.hpp"
#include "test_paths.hpp"
#include "audited_run.hpp"

namespace fs = std::filesystem;
using namespace coopsim;

// A namespace of its own: the unity build (scripts/test.sh) compiles several test files as one.
namespace import_dtr_test {

namespace {

const std::string kMlp = "tests/data/dtr/mlp-4-2000.0-2021-3-17-12-0-0-default.log";
const std::string kZero = "tests/data/dtr/zero_bytes.log";

const DtrOptions kInPlace{false};
const DtrOptions kCopyOnWrite{true};

std::string tensor_name(const Trace& t, std::uint32_t i) { return t.tensors[i].name; }

// Events as short text: "alloc w", "compute linear", "mark backward", "iteration 0".
std::vector<std::string> events(const Trace& t) {
  std::vector<std::string> out;
  for (const auto& e : t.events) {
    switch (e.kind) {
      case EventKind::Alloc: out.push_back("alloc " + tensor_name(t, index_of(e.tensor()))); break;
      case EventKind::Free: out.push_back("free " + tensor_name(t, index_of(e.tensor()))); break;
      case EventKind::Access:
        out.push_back(std::string(e.write ? "write " : "read ") + tensor_name(t, index_of(e.tensor())));
        break;
      case EventKind::Compute: out.push_back("compute " + t.op(e.compute_op()).name); break;
      case EventKind::Iteration: out.push_back("iteration " + std::to_string(e.iteration_index())); break;
      case EventKind::Mark: out.push_back("mark " + t.labels[e.label_index()]); break;
    }
  }
  return out;
}

std::vector<std::string> names(const Trace& t, const std::vector<TensorId>& ids) {
  std::vector<std::string> out;
  for (const auto id : ids) out.push_back(tensor_name(t, index_of(id)));
  return out;
}

// "name bytes role [view of root]"
std::vector<std::string> tensors(const Trace& t) {
  std::vector<std::string> out;
  for (const auto& x : t.tensors) {
    std::string s = x.name + " " + std::to_string(x.size.value) + " " + std::string(to_string(x.role));
    if (x.is_view()) s += " view of " + tensor_name(t, index_of(x.view_of));
    out.push_back(s);
  }
  return out;
}

// "name duration in(...) out(...) views(o<-i) mutates(...)"
std::vector<std::string> ops(const Trace& t) {
  std::vector<std::string> out;
  const auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i) s += (i > 0 ? "," : "") + v[i];
    return s;
  };
  for (const auto& op : t.ops) {
    std::string s = op.name + " " + std::to_string(op.duration.count()) + " in(" + join(names(t, op.inputs)) +
                    ") out(" + join(names(t, op.outputs)) + ")";
    for (const auto& [o, i] : op.views)
      s += " view(" + tensor_name(t, index_of(o)) + "<-" + tensor_name(t, index_of(i)) + ")";
    if (!op.mutated.empty()) s += " mutates(" + join(names(t, op.mutated)) + ")";
    out.push_back(s);
  }
  return out;
}

// Writes the trace, loads it back (full v1 validation) and checks nothing changed.
Trace round_trip(const Trace& trace, const std::string& file) {
  const auto dir = test::scratch_dir("import-dtr-rt");
  const std::string out = (dir / file).string();
  write_trace(trace, out);
  Trace back = load_trace(out);
  CHECK(back.header == trace.header);
  CHECK(back.tensors == trace.tensors);
  CHECK(back.ops == trace.ops);
  CHECK(back.events == trace.events);
  CHECK(back.labels == trace.labels);
  return back;
}

// Replays under fungible memory (DTR's address-blind counter) with no eviction.
Report replay(const Trace& trace) {
  SimConfig cfg;
  cfg.doc = {{"allocator", "fungible"}, {"policy", "keep"}, {"budget", "1GiB"}, {"engine", {{"paranoid", true}}}};
  return test::audited_run(cfg, trace);
}

}  // namespace

// ---- the instruction-complete log -------------------------------------------------------

// Tensors of mlp-4-...log (both modes): the pre-START constant x0 is skipped; w and in are
// constants; h, a, st, l forward results; av a view of a (ALIAS 0); gw a backward result.
const std::vector<std::string> kMlpTensors = {
    "w 1000 parameter", "in 400 parameter",          "h 200 activation", "a 200 activation",
    "st 8 activation",  "av 0 activation view of a", "l 4 activation",   "gw 1000 gradient",
};

TEST_CASE("dtr: every instruction, MUTATE in place", "[import][dtr]") {
  const Trace t = import_dtr_log(kMlp, kInPlace);
  CHECK(t.header.model == "mlp");
  CHECK(t.header.time_unit == "ns");
  CHECK(t.header.iterations == 1);
  CHECK(t.header.source == nlohmann::json{{"tool", "dtr-import"},
                                          {"file", "mlp-4-2000.0-2021-3-17-12-0-0-default.log"},
                                          {"mutate", "in-place"},
                                          {"batch", 4},
                                          {"budget", "2000.0"}});
  CHECK(tensors(t) == kMlpTensors);
  // w1 is a COPY of w, so ops read w's tensor through it.
  CHECK(ops(t) == std::vector<std::string>{
                      "linear 3000 in(in,w) out(h)",
                      "relu_stats 1500 in(h) out(a,st)",
                      "view 10 in(a) out(av) view(av<-a)",
                      "loss 500 in(av,st) out(l)",
                      "linear_backward 6000 in(l,av,w) out(gw)",
                      "add_ 700 in(w,gw) out() mutates(w)",
                  });
  // RELEASE h frees h; RELEASE x0 is ignored (undefined since START); RELEASE a leaves a's
  // storage alive through av, whose RELEASE frees it; COPY_FROM w1 <- w reads w and leaves
  // w with its two references (w, w1): w stays live, as an output of the iteration.
  CHECK(events(t) == std::vector<std::string>{
                         "alloc w",
                         "alloc in",
                         "iteration 0",
                         "alloc h",
                         "compute linear",
                         "alloc a",
                         "alloc st",
                         "compute relu_stats",
                         "compute view",
                         "free h",
                         "alloc l",
                         "compute loss",
                         "mark backward",
                         "alloc gw",
                         "compute linear_backward",
                         "free a",
                         "free l",
                         "free st",
                         "compute add_",
                         "free gw",
                         "read w",
                         "free in",
                     });
  const TraceSummary s = summarize(t);
  // Peak: w 1000 + in 400 + a 200 + st 8 + l 4 + gw 1000 = 2612 when gw is allocated.
  CHECK(s.peak_live.value == 2612);
  CHECK(s.total_allocated.value == 1000 + 400 + 200 + 200 + 8 + 4 + 1000);
  CHECK(s.compute_time.count() == 3000 + 1500 + 10 + 500 + 6000 + 700);
  CHECK(s.views == 1);
  round_trip(t, "mlp-inplace.jsonl");
  const Report r = replay(t);
  CHECK(r.status == RunStatus::Completed);
  CHECK(r.memory.peak_requested.value == 2612);
}

TEST_CASE("dtr: every instruction, MUTATE as copy-on-write", "[import][dtr]") {
  const Trace t = import_dtr_log(kMlp, kCopyOnWrite);
  CHECK(t.header.source["mutate"] == "copy-on-write");
  std::vector<std::string> want_tensors = kMlpTensors;
  want_tensors.push_back("w$ 1000 parameter");  // the new version of w (parse.py names it w$)
  CHECK(tensors(t) == want_tensors);
  CHECK(ops(t).back() == "add_ 700 in(w,gw) out(w$)");
  // add_ allocates w$ and rebinds w; the old w keeps w1's reference until COPY_FROM w1 <- w
  // moves it to w$, which frees the old w and reads w$.
  CHECK(events(t) == std::vector<std::string>{
                         "alloc w",
                         "alloc in",
                         "iteration 0",
                         "alloc h",
                         "compute linear",
                         "alloc a",
                         "alloc st",
                         "compute relu_stats",
                         "compute view",
                         "free h",
                         "alloc l",
                         "compute loss",
                         "mark backward",
                         "alloc gw",
                         "compute linear_backward",
                         "free a",
                         "free l",
                         "free st",
                         "alloc w$",
                         "compute add_",
                         "free gw",
                         "free w",
                         "read w$",
                         "free in",
                     });
  // Peak: after the backward frees 2400 live (w, in, gw); w$ adds 1000 -> 3400.
  const TraceSummary s = summarize(t);
  CHECK(s.peak_live.value == 3400);
  CHECK(s.compute_time.count() == 11710);
  round_trip(t, "mlp-cow.jsonl.gz");
  const Report r = replay(t);
  CHECK(r.status == RunStatus::Completed);
  CHECK(r.memory.peak_requested.value == 3400);
}

// ---- zero-byte storages, backward by op name, other annotations -------------------------

TEST_CASE("dtr: zero-byte storages stay out of ops and events, in place", "[import][dtr]") {
  const Trace t = import_dtr_log(kZero, kInPlace);
  CHECK(t.header.model.empty());  // the file name does not follow <model>-<batch>-<budget>-...
  CHECK(t.header.source == nlohmann::json{{"tool", "dtr-import"}, {"file", "zero_bytes.log"}, {"mutate", "in-place"}});
  // e, ev (a view of e's 0-byte storage) and e2 are defined, with 0 bytes and no view link.
  CHECK(tensors(t) == std::vector<std::string>{"p 512 parameter", "e 0 activation", "ev 0 activation",
                                               "c 1024 activation", "e2 0 activation", "g 512 gradient"});
  CHECK(ops(t) == std::vector<std::string>{
                      "new_empty 5 in(p) out()",
                      "expand 1 in() out()",
                      "cat 20 in(p) out(c)",
                      "cat_backward 40 in(c) out(g)",
                      "zero_ 3 in(g) out() mutates(g)",
                  });
  // "backward" in an op name starts the backward pass; the later ANNOTATE BACKWARD adds no
  // second mark; other annotations are kept as marks.
  CHECK(events(t) == std::vector<std::string>{
                         "alloc p",
                         "iteration 0",
                         "compute new_empty",
                         "compute expand",
                         "alloc c",
                         "compute cat",
                         "mark CHECKPOINT",
                         "mark backward",
                         "alloc g",
                         "compute cat_backward",
                         "compute zero_",
                         "free c",
                         "free g",
                     });
  CHECK(summarize(t).peak_live.value == 512 + 1024 + 512);
  round_trip(t, "zero-inplace.jsonl");
  CHECK(replay(t).memory.peak_requested.value == 2048);
}

TEST_CASE("dtr: zero-byte storages stay out of ops and events, copy-on-write", "[import][dtr]") {
  const Trace t = import_dtr_log(kZero, kCopyOnWrite);
  CHECK(tensors(t) == std::vector<std::string>{"p 512 parameter", "e 0 activation", "ev 0 activation",
                                               "c 1024 activation", "e2 0 activation", "g 512 gradient",
                                               "e$ 0 activation", "g$ 512 gradient"});
  CHECK(ops(t).back() == "zero_ 3 in(g) out(g$)");
  // zero_ drops the last reference of g (freed at once) but not of e (ev still views it).
  CHECK(events(t) == std::vector<std::string>{
                         "alloc p",
                         "iteration 0",
                         "compute new_empty",
                         "compute expand",
                         "alloc c",
                         "compute cat",
                         "mark CHECKPOINT",
                         "mark backward",
                         "alloc g",
                         "compute cat_backward",
                         "alloc g$",
                         "compute zero_",
                         "free g",
                         "free c",
                         "free g$",
                     });
  CHECK(summarize(t).peak_live.value == 512 + 1024 + 512 + 512);
  round_trip(t, "zero-cow.jsonl");
  CHECK(replay(t).memory.peak_requested.value == 2560);
}

TEST_CASE("dtr: the import is deterministic and reads gzip-compressed logs", "[import][dtr]") {
  const auto dir = test::scratch_dir("import-dtr-gz");
  const std::string gz = (dir / "mlp-4-2000.0-x.log.gz").string();
  {
    std::ifstream in(kMlp, std::ios::binary);
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    gzFile f = gzopen(gz.c_str(), "wb");
    REQUIRE(f != nullptr);
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
  }
  const Trace plain = import_dtr_log(kMlp, kCopyOnWrite);
  const Trace zipped = import_dtr_log(gz, kCopyOnWrite);
  CHECK(zipped.header.model == "mlp");
  CHECK(zipped.tensors == plain.tensors);
  CHECK(zipped.ops == plain.ops);
  CHECK(zipped.events == plain.events);
  const auto read = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  };
  write_trace(plain, (dir / "a.jsonl").string());
  write_trace(import_dtr_log(kMlp, kCopyOnWrite), (dir / "b.jsonl").string());
  CHECK(read((dir / "a.jsonl").string()) == read((dir / "b.jsonl").string()));
}

TEST_CASE("dtr: import command writes a trace that validates", "[import][dtr]") {
  const auto dir = test::scratch_dir("import-dtr-cmd");
  const std::string out = (dir / "mlp.jsonl.gz").string();
  std::ostringstream msg;
  ImportArgs args;
  args.kind = "dtr";
  args.input = kMlp;
  args.output = out;
  args.copy_on_write = true;
  CHECK(command_import(args, msg) == 0);
  CHECK(msg.str() == kMlp + " -> " + out + ": 9 tensors, 6 ops, 24 events, peak live 3.32 KiB (3400 bytes)\n");
  std::ostringstream v;
  CHECK(command_validate(out, "", v) == 0);
  CHECK(v.str().find("peak live 3.32 KiB (3400 bytes), op compute time 11.710 us") != std::string::npos);
  // A failed import leaves no output behind.
  const std::string bad_out = (dir / "bad.jsonl").string();
  args.input = kMlp + ".missing";
  args.output = bad_out;
  args.copy_on_write = false;
  CHECK_THROWS_AS(command_import(args, msg), InputError);
  CHECK(!fs::exists(bad_out));
  CHECK(!fs::exists(bad_out + ".tmp"));
}

// ---- handles: mutation of a view, self COPY_FROM, use through a released handle ---------

TEST_CASE("dtr: handles, views and references in both MUTATE modes", "[import][dtr]") {
  const auto dir = test::scratch_dir("import-dtr-handles");
  const std::string path = (dir / "handles.log").string();
  std::ofstream(path) << R"({"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}
{"INSTRUCTION":"CONSTANT","NAME":"b"}
{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"b"}
{"ARGS":["b"],"INSTRUCTION":"CALL","NAME":"t","RESULT":["v"],"TIME":"1"}
{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"v"}
{"ALIAS":"0","INSTRUCTION":"ALIAS","NAME":"v"}
{"ARGS":["v"],"INSTRUCTION":"MUTATE","MUTATE":[0],"NAME":"mul_","TIME":"2"}
{"DST":"v","INSTRUCTION":"COPY_FROM","SRC":"v"}
{"DST":"b2","INSTRUCTION":"COPY","SRC":"b"}
{"INSTRUCTION":"RELEASE","NAME":"b"}
{"ARGS":["b"],"INSTRUCTION":"CALL","NAME":"sum","RESULT":["s"],"TIME":"3"}
{"INSTRUCTION":"MEMORY","MEMORY":"4","NAME":"s"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"s"}
{"INSTRUCTION":"RELEASE","NAME":"b2"}
)";
  SECTION("in place: v keeps b's storage alive to the end") {
    const Trace t = import_dtr_log(path, kInPlace);
    CHECK(tensors(t) == std::vector<std::string>{"b 100 parameter", "v 0 parameter view of b", "s 4 activation"});
    CHECK(ops(t) == std::vector<std::string>{"t 1 in(b) out(v) view(v<-b)", "mul_ 2 in(v) out() mutates(v)",
                                             "sum 3 in(b) out(s)"});
    // The released handle b still reaches its tensor through b2's reference (as in parse.py).
    CHECK(events(t) == std::vector<std::string>{"alloc b", "iteration 0", "compute t", "compute mul_", "read v",
                                                "alloc s", "compute sum"});
    CHECK(summarize(t).peak_live.value == 104);
    round_trip(t, "handles-inplace.jsonl");
    CHECK(replay(t).memory.peak_requested.value == 104);
  }
  SECTION("copy-on-write: v$ gets a fresh storage of the base's full size; b dies with b2") {
    const Trace t = import_dtr_log(path, kCopyOnWrite);
    CHECK(tensors(t) ==
          std::vector<std::string>{"b 100 parameter", "v 0 parameter view of b", "v$ 100 parameter", "s 4 activation"});
    CHECK(ops(t)[1] == "mul_ 2 in(v) out(v$)");
    CHECK(events(t) == std::vector<std::string>{"alloc b", "iteration 0", "compute t", "alloc v$", "compute mul_",
                                                "read v$", "alloc s", "compute sum", "free b"});
    CHECK(summarize(t).peak_live.value == 204);
    round_trip(t, "handles-cow.jsonl");
    CHECK(replay(t).memory.peak_requested.value == 204);
  }
}

TEST_CASE("dtr: model, batch and budget come from the public logs' file names", "[import][dtr]") {
  const auto dir = test::scratch_dir("import-dtr-names");
  const auto header_of = [&](const std::string& name) {
    const fs::path p = dir / name;
    fs::copy_file(kMlp, p, fs::copy_options::overwrite_existing);
    return import_dtr_log(p.string()).header;
  };
  const TraceHeader h = header_of("tv_densenet121-84-10000000000.0-2020-10-1-13-41-18-default.log");
  CHECK(h.model == "tv_densenet121");
  CHECK(h.source["batch"] == 84);
  CHECK(h.source["budget"] == "10000000000.0");
  CHECK(h.source["file"] == "tv_densenet121-84-10000000000.0-2020-10-1-13-41-18-default.log");
  CHECK(header_of("unroll_gan-512-10000000000.0-2020-10-1-18-43-42-default.log").model == "unroll_gan");
  // Other shapes: no model name, no batch or budget.
  for (const char* other : {"resnet32-56-big-default.log", "resnet32-x-9000000000.0-d.log", "-4-100-d.log",
                            "resnet32-56-9000000000.0-d.txt", "trace.log"}) {
    INFO(other);
    const TraceHeader o = header_of(other);
    CHECK(o.model.empty());
    CHECK(!o.source.contains("batch"));
  }
}

}  // namespace import_dtr_test
