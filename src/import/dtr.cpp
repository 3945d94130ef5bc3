// DTR prototype log -> coopsim trace v1.
//
// Semantics follow DTR's reference reader and simulator (uwsampl/dtr-prototype @eff53cc4:
// simrd/simrd/parse/parse.py, parse/graph.py, tensor.py, runtime/v1.py):
//   * three levels: names (handles) -> tensors -> storages; memory belongs to storages;
//   * every CONSTANT and CALL result starts with one reference, COPY adds one, RELEASE drops one
//     (a RELEASE of a name not defined since START is ignored), COPY_FROM moves one;
//   * ALIAS -1 = a fresh storage of MEMORY bytes, ALIAS i = a view of ARGS[i]'s storage (0 bytes);
//   * a storage dies (is freed) when the references of all its tensors reach zero (simrd's
//     Storage.ref_ext), and can never be used again (simrd asserts on it);
//   * MUTATE is an in-place op, or with copy_on_write simrd's rule: per mutated index a new
//     tensor "<name>$" on a fresh storage of the old storage's size, produced by an op reading
//     all ARGS; the handle is rebound and the old tensor loses its reference;
//   * backward starts at ANNOTATE BACKWARD or the first op whose name contains "backward".
// The mapping, the decisions where v1 differs (zero-byte storages, constants) and the limits are
// documented in docs/import-dtr.md.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <new>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "coopsim/import/registry.hpp"
#include "coopsim/base/error.hpp"
#include "coopsim/import/importers.hpp"
#include "dtr_simrd.hpp"
#include "dtr_records.hpp"
#include "dtr_refs.hpp"

namespace coopsim {
namespace {

using dtr_detail::DtrLogReader;
using dtr_detail::DtrRecord;
using dtr_detail::DtrRefs;
using dtr_detail::Instr;
using dtr_detail::instr_name;
using dtr_detail::parse_log_name;
using dtr_detail::quote;

class DtrConverter {
 public:
  DtrConverter(const std::string& path, const DtrOptions& options, const Limits& limits)
      : reader_(path, limits.max_input_bytes, limits.max_memory), options_(options), refs_(path) {
    if (options_.simrd_compat) options_.copy_on_write = true;  // simrd always copies on write (parse.py)
  }

  Trace run() {
    header();
    skip_to_start();
    DtrRecord r;
    while (reader_.next(r)) dispatch(r);
    trace_.events = std::move(prelude_);
    trace_.events.push_back(TraceEvent::iteration(0));
    const std::size_t body_offset = trace_.events.size();
    trace_.events.insert(trace_.events.end(), body_.begin(), body_.end());
    if (options_.simrd_compat) {
      trace_.header.extra["simrd"] = simrd_.json(body_offset, refs_.referenced_in_name_order());
    }
    return std::move(trace_);
  }

 private:
  [[noreturn]] void fail(std::uint64_t line, const std::string& problem) const {
    throw InputError(reader_.path(), line, problem);
  }

  void header() {
    const std::string file = std::filesystem::path(reader_.path()).filename().string();
    trace_.path = reader_.path();
    trace_.header.time_unit = "ns";
    trace_.header.iterations = 1;
    trace_.header.source = {
        {"tool", "dtr-import"}, {"file", file}, {"mutate", options_.copy_on_write ? "copy-on-write" : "in-place"}};
    if (options_.simrd_compat) trace_.header.source["compat"] = "simrd";
    if (const auto n = parse_log_name(file)) {
      trace_.header.model = n->model;
      trace_.header.source["batch"] = std::stoull(n->batch);
      trace_.header.source["budget"] = n->budget;  // as written (bytes, e.g. "8000000000.0")
    }
    trace_.header.extra = nlohmann::json::object();
  }

  // The reference reader drops everything before the first START; those lines are still
  // parsed (and must be well formed), as parse.py parses the whole file first.
  void skip_to_start() {
    DtrRecord r;
    bool any = false;
    while (reader_.next(r)) {
      any = true;
      if (r.instr == Instr::Annotate && r.annotation == "START") return;
    }
    if (!any) fail(reader_.end_line(), "empty DTR log: no records");
    fail(reader_.end_line(), "no ANNOTATE START record: the measured iteration never starts");
  }

  void dispatch(const DtrRecord& r) {
    switch (r.instr) {
      case Instr::Annotate: on_annotate(r); break;
      case Instr::Constant: on_constant(r); break;
      case Instr::Call: on_call(r); break;
      case Instr::Copy: on_copy(r); break;
      case Instr::Release: on_release(r); break;
      case Instr::Mutate: on_mutate(r); break;
      case Instr::CopyFrom: on_copy_from(r); break;
      case Instr::Memory:
        fail(r.line, fmt::format("MEMORY record for {} without a CONSTANT or CALL that expects it", quote(r.name)));
      case Instr::Alias: fail(r.line, fmt::format("ALIAS record for {} without a CALL that expects it", quote(r.name)));
    }
  }

  // ---- annotations ----------------------------------------------------------------------

  void on_annotate(const DtrRecord& r) {
    if (r.annotation == "BACKWARD") {
      enter_backward();
    } else {
      mark(r.annotation);  // later STARTs and other annotations: kept as marks (simrd ignores them)
    }
  }

  void enter_backward() {
    if (in_backward_) return;
    in_backward_ = true;
    mark("backward");
  }

  void mark(const std::string& label) {
    std::uint32_t index = 0;
    while (index < trace_.labels.size() && trace_.labels[index] != label) ++index;
    if (index == trace_.labels.size()) reader_.hold(trace_.labels, memory_cost::label(label));
    if (index == trace_.labels.size()) trace_.labels.push_back(label);
    emit(TraceEvent::mark(index));
  }

  // ---- records that follow CONSTANT and CALL --------------------------------------------

  DtrRecord follow(Instr want, const std::string& name, const std::string& owner) {
    DtrRecord r;
    if (!reader_.next(r)) {
      fail(reader_.end_line(),
           fmt::format("file ends before the {} record of {} (truncated?)", instr_name(want), owner));
    }
    if (r.instr != want) {
      const std::string_view got = instr_name(r.instr);
      fail(r.line, fmt::format("expected the {} record of {}, got {} {} record", instr_name(want), owner,
                               got.front() == 'A' ? "an" : "a", got));
    }
    if (r.name != name) {
      fail(r.line, fmt::format("expected the {} record of {}, got one for {}", instr_name(want), owner, quote(r.name)));
    }
    return r;
  }

  // ---- tensors and storages -------------------------------------------------------------

  // A new tensor with one reference on `storage` (a DtrRefs storage), defined in v1 with the
  // same index: the first tensor of a storage owns its bytes, later ones are views of it.
  std::uint32_t new_tensor(const std::string& name, TensorRole role, std::uint32_t storage) {
    const std::uint32_t index = refs_.new_tensor(storage);
    TensorInfo t;
    t.id = TensorId{index};
    t.file_id = index;
    t.role = role;
    t.name = name;
    if (refs_.root_of(index) == index) {
      t.size = Bytes{refs_.bytes_of(index)};
    } else if (has_memory(index)) {
      t.view_of = TensorId{refs_.root_of(index)};  // what the loader derives from the op's "views"
    } else if (options_.simrd_compat) {
      simrd_.note_root(index, refs_.root_of(index));
    }
    reader_.hold(trace_.tensors, memory_cost::tensor(t) + DtrRefs::kBytesPerTensor);
    trace_.tensors.push_back(std::move(t));
    return index;
  }

  // Zero-byte storages exist in real logs; v1 cannot allocate 0 bytes, so their tensors stay
  // out of every op and event (docs/import-dtr.md).
  bool has_memory(std::uint32_t tensor) const { return refs_.bytes_of(tensor) > 0; }
  TensorRole root_role(std::uint32_t tensor) const { return trace_.tensors[refs_.root_of(tensor)].role; }

  // Drops one reference; frees the storage when it was the last one on it.
  void drop_reference(std::uint32_t tensor, const std::string& where, const std::string& name, std::uint64_t line) {
    const std::uint32_t dead_root = refs_.drop_reference(tensor, where, name, line);
    if (dead_root != DtrRefs::kNone && has_memory(dead_root)) emit(TraceEvent::free(TensorId{dead_root}));
    if (dead_root != DtrRefs::kNone && !has_memory(dead_root) && options_.simrd_compat) {
      simrd_.note_free(body_.size(), dead_root);
    }
  }

  // ---- instructions ---------------------------------------------------------------------

  void on_constant(const DtrRecord& r) {
    const std::string owner = fmt::format("CONSTANT {} (line {})", quote(r.name), r.line);
    const DtrRecord m = follow(Instr::Memory, r.name, owner);
    refs_.check_new_name(r.name, "CONSTANT", r.line);
    // Parameters and inputs look alike in the log; both exist before the iteration.
    const std::uint32_t t = new_tensor(r.name, TensorRole::Parameter, refs_.new_storage(m.memory));
    refs_.bind(r.name, t, r.line);
    // simrd profile: at the record, where simrd's parse_file computes the constant (parse/parse.py),
    // which matters when a peak comes before a late constant.
    if (m.memory > 0) emit_to(options_.simrd_compat ? body_ : prelude_, TraceEvent::alloc(TensorId{t}));
  }

  void on_call(const DtrRecord& r) {
    const std::string call = fmt::format("CALL {}", quote(r.name));
    // The MEMORY and ALIAS records of every result come first, in RESULT order.
    std::vector<DtrRecord> memory, alias;
    for (const auto& res : r.result) {
      const std::string owner = fmt::format("result {} of CALL {} (line {})", quote(res), quote(r.name), r.line);
      memory.push_back(follow(Instr::Memory, res, owner));
      alias.push_back(follow(Instr::Alias, res, owner));
      if (alias.back().alias >= static_cast<std::int64_t>(r.args.size())) {
        fail(alias.back().line, fmt::format("ALIAS {} of {} is out of range (the CALL has {} ARGS)", alias.back().alias,
                                            owner, r.args.size()));
      }
    }
    if (r.name.find("backward") != std::string::npos) enter_backward();
    std::vector<std::uint32_t> args;
    for (std::size_t i = 0; i < r.args.size(); ++i) {
      args.push_back(refs_.use(r.args[i], fmt::format("{} ARGS[{}]", call, i), r.line));
    }
    for (std::size_t i = 0; i < r.result.size(); ++i) {
      for (std::size_t k = 0; k < i; ++k) {
        if (r.result[k] == r.result[i]) {
          fail(r.line, fmt::format("{}: result {} is listed twice", call, quote(r.result[i])));
        }
      }
      refs_.check_new_name(r.result[i], call + " RESULT", r.line);
    }

    OpInfo op = new_op(r);
    for (const auto a : args) {
      if (has_memory(a)) op.inputs.push_back(TensorId{a});
    }
    const TensorRole role = in_backward_ ? TensorRole::Gradient : TensorRole::Activation;
    std::vector<std::uint32_t> fresh, results;
    for (std::size_t i = 0; i < r.result.size(); ++i) {
      std::uint32_t t = 0;
      if (alias[i].alias < 0) {
        t = new_tensor(r.result[i], role, refs_.new_storage(memory[i].memory));
        if (has_memory(t)) fresh.push_back(t);
      } else {
        const std::uint32_t base = args[static_cast<std::size_t>(alias[i].alias)];
        t = new_tensor(r.result[i], root_role(base), refs_.storage_of(base));
        if (has_memory(t)) op.views.emplace_back(TensorId{t}, TensorId{base});
      }
      refs_.bind(r.result[i], t, r.line);
      if (has_memory(t)) op.outputs.push_back(TensorId{t});
      results.push_back(t);
    }
    for (const auto t : fresh) emit(TraceEvent::alloc(TensorId{t}));
    note_simrd_op(op, args, results);
    compute(std::move(op));
  }

  void on_mutate(const DtrRecord& r) {
    const std::string where = fmt::format("MUTATE {}", quote(r.name));
    if (r.name.find("backward") != std::string::npos) enter_backward();
    std::vector<std::uint32_t> args;
    for (std::size_t i = 0; i < r.args.size(); ++i) {
      args.push_back(refs_.use(r.args[i], fmt::format("{} ARGS[{}]", where, i), r.line));
    }
    for (std::size_t k = 0; k < r.mutate.size(); ++k) {
      const std::uint64_t m = r.mutate[k];
      if (m >= args.size()) {
        fail(r.line, fmt::format("{}: index {} is out of range (the MUTATE has {} ARGS)", where, m, args.size()));
      }
      for (std::size_t j = 0; j < k; ++j) {
        if (r.mutate[j] == m) fail(r.line, fmt::format("{}: index {} is listed twice", where, m));
        if (args[r.mutate[j]] == args[m]) {
          fail(r.line, fmt::format("{}: ARGS[{}] {} and ARGS[{}] {} are the same tensor, written twice", where,
                                   r.mutate[j], quote(r.args[r.mutate[j]]), m, quote(r.args[m])));
        }
      }
    }

    OpInfo op = new_op(r);
    for (const auto a : args) {
      if (has_memory(a)) op.inputs.push_back(TensorId{a});
    }
    if (!options_.copy_on_write) {
      for (const auto m : r.mutate) {
        if (has_memory(args[m])) op.mutated.push_back(TensorId{args[m]});
      }
      compute(std::move(op));
      return;
    }
    // Copy-on-write (parse.py): new versions first, then rebind and release the old ones.
    std::vector<std::uint32_t> versions;
    for (const auto m : r.mutate) {
      const std::uint32_t old = args[m];
      const std::uint32_t storage = refs_.new_storage(refs_.bytes_of(old));
      const std::uint32_t t = new_tensor(trace_.tensors[old].name + "$", root_role(old), storage);
      versions.push_back(t);
      if (has_memory(t)) {
        op.outputs.push_back(TensorId{t});
        emit(TraceEvent::alloc(TensorId{t}));
      }
    }
    note_simrd_op(op, args, versions);
    compute(std::move(op));
    for (std::size_t k = 0; k < r.mutate.size(); ++k) {
      const std::string& name = r.args[r.mutate[k]];
      const std::uint32_t old = args[r.mutate[k]];
      refs_.bind(name, versions[k], r.line);
      drop_reference(old, fmt::format("{} ARGS[{}]", where, r.mutate[k]), name, r.line);
    }
  }

  void on_copy(const DtrRecord& r) {
    refs_.check_new_name(r.dst, "COPY DST", r.line);
    const std::uint32_t t = refs_.use(r.src, "COPY SRC", r.line);
    refs_.add_reference(t);
    refs_.bind(r.dst, t, r.line);
  }

  void on_release(const DtrRecord& r) {
    const std::uint32_t t = refs_.find(r.name);
    if (t == DtrRefs::kNone) return;  // created before START (simrd: ignore_undefined_release)
    drop_reference(t, "RELEASE", r.name, r.line);
  }

  void on_copy_from(const DtrRecord& r) {
    const std::uint32_t src = refs_.use(r.src, "COPY_FROM SRC", r.line);
    const std::uint32_t old = refs_.find(r.dst);
    if (old == DtrRefs::kNone) {
      fail(r.line, fmt::format("COPY_FROM DST: undefined name {} (not defined since START)", quote(r.dst)));
    }
    // simrd releases the old tensor, then gets SRC's; taking SRC's reference first gives the
    // same counts and keeps a self-copy (old == SRC's tensor) from killing the storage.
    refs_.add_reference(src);
    refs_.bind(r.dst, src, r.line);
    drop_reference(old, "COPY_FROM DST", r.dst, r.line);
    if (has_memory(src)) emit(TraceEvent::access(TensorId{src}, /*write=*/false));
  }

  // ---- ops and events -------------------------------------------------------------------

  OpInfo new_op(const DtrRecord& r) const {
    OpInfo op;
    const auto index = static_cast<std::uint32_t>(trace_.ops.size());
    op.id = OpId{index};
    op.file_id = index;
    op.name = r.name;
    op.duration = SimTime{r.time_ns};
    return op;
  }

  // simrd profile: an op that lost zero-byte tensors keeps its full lists in the header.
  void note_simrd_op(const OpInfo& op, const std::vector<std::uint32_t>& inputs,
                     const std::vector<std::uint32_t>& outputs) {
    if (!options_.simrd_compat) return;
    if (op.inputs.size() == inputs.size() && op.outputs.size() == outputs.size()) return;
    simrd_.note_op(index_of(op.id), inputs, outputs);
  }

  void compute(OpInfo op) {
    const OpId id = op.id;
    reader_.hold(trace_.ops, memory_cost::op(op));
    trace_.ops.push_back(std::move(op));
    emit(TraceEvent::compute(id));
  }

  void emit(const TraceEvent& e) { emit_to(body_, e); }
  void emit_to(std::vector<TraceEvent>& to, const TraceEvent& e) {
    reader_.hold(to, 2 * memory_cost::kEvent);  // twice: the trace's events copy prelude and body
    to.push_back(e);
  }

  DtrLogReader reader_;
  DtrOptions options_;
  Trace trace_;
  std::vector<TraceEvent> prelude_;  // allocations of the constants, before iteration 0
  std::vector<TraceEvent> body_;
  DtrRefs refs_;                  // its tensor indices are the v1 tensor indices
  dtr_detail::SimrdExtra simrd_;  // --compat simrd: zero-byte tensors (dtr_simrd.hpp)
  bool in_backward_ = false;
};

}  // namespace

Trace import_dtr_log(const std::string& path, const DtrOptions& options, const Limits& limits) {
  Trace t;
  try {
    t = DtrConverter(path, options, limits).run();
  } catch (const std::bad_alloc&) {
    throw out_of_memory(path, limits.max_memory);
  }
  check_limits(t, limits, path);
  return t;
}

// Its line in the registry (src/import/registry.cpp).
ImporterEntry dtr_importer_entry() {
  return {"dtr", "a DTR prototype log (uwsampl/dtr-prototype; docs/import-dtr.md)", {"--copy-on-write", "--compat"},
          {"coopsim", "simrd"}, [](const std::string& input, const ImportOptions& o) {
            return import_dtr_log(input, DtrOptions{o.copy_on_write, o.compat == "simrd"}, o.limits);
          }, nullptr};
}

}  // namespace coopsim
