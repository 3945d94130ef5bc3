// Allow-list pickle reader: decodes opcodes and their arguments (encodings from the Python
// pickle protocol specification, Lib/pickletools.py) and drives the plain-data stack machine
// (pickle_builder.cpp). Anything that would import or call code is refused by opcode, before
// any of its arguments is read. Rules and decisions: include/coopsim/formats/pickle.hpp;
// the allowed subset is listed there too.
#include "coopsim/formats/pickle.hpp"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <limits>

#include "coopsim/base/limits.hpp"
#include "pickle_builder.hpp"
#include "pickle_detail.hpp"
#include "pickle_input.hpp"
#include "pickle_opcodes.hpp"
#include "pickle_pool.hpp"

namespace coopsim::pickle {
namespace detail {

const std::shared_ptr<Value>& constant(Value::Kind kind, bool b) {
  // From the heap: they outlive the per-thread free lists.
  static const std::shared_ptr<Value> none = std::make_shared<Value>();
  static const std::shared_ptr<Value> yes = [] {
    auto v = std::make_shared<Value>();
    v->kind = Value::Kind::Bool;
    v->boolean = true;
    return v;
  }();
  static const std::shared_ptr<Value> no = [] {
    auto v = std::make_shared<Value>();
    v->kind = Value::Kind::Bool;
    return v;
  }();
  return kind == Value::Kind::None ? none : b ? yes : no;
}

}  // namespace detail
namespace {

using Kind = Value::Kind;
using detail::Input;

// Work allowed for dict-key comparisons: far above anything a real pickle needs (one
// comparison per key), yet bounded for crafted ones.
constexpr std::uint64_t kCompareBudgetPerByte = 64;
constexpr std::uint64_t kCompareBudgetBase = 1'000'000;

class Reader {
 public:
  Reader(Input& in, const std::string& name, MemoryCap& memory)
      : in_(in), name_(name), build_(kCompareBudgetBase + kCompareBudgetPerByte * in.size(), memory) {}

  // Streaming (pickle_stream.hpp): keep only the memo entries in `fetched`; `sink` takes items.
  void stream(const detail::IndexSet& fetched, ItemSink& sink) {
    build_.stream(fetched, sink);
    streaming_ = true;
  }

  ValuePtr run() {
    for (;;) {
      op_at_ = in_.pos();
      if (in_.left() == 0) {
        fail(in_.size() == 0 ? "empty input: no pickle" : "input ends before STOP (truncated pickle)");
      }
      op_ = in_.byte();
      try {
        if (op_ == op::kStop) return stop();
        step();
      } catch (const detail::BuildError& e) {
        fail_op(e.problem);
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const { throw PickleError(name_, op_at_, problem); }
  [[noreturn]] void fail_op(const std::string& problem) const { fail(fmt::format("{}: {}", op::name(op_), problem)); }

  std::uint64_t left() const { return in_.left(); }

  // The next n bytes of the current opcode's argument.
  std::string_view take(std::uint64_t n, const char* what = "argument") {
    if (n > left()) {
      fail_op(fmt::format("{} of {} byte{} runs past the end of the input ({} left; truncated?)", what, n,
                          n == 1 ? "" : "s", left()));
    }
    return in_.take(static_cast<std::size_t>(n));
  }

  std::uint64_t le(std::size_t n) {
    const std::string_view s = take(n);
    std::uint64_t v = 0;
    for (std::size_t i = n; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(s[i]);
    return v;
  }

  std::int32_t le_signed32() { return static_cast<std::int32_t>(static_cast<std::uint32_t>(le(4))); }

  // A protocol-0 argument: the bytes up to the next newline, which is consumed.
  std::string_view line() {
    const std::optional<std::string_view> s = in_.line();
    if (!s) fail_op("argument has no terminating newline (truncated input)");
    return *s;
  }

  void check(const std::string& problem) const {
    if (!problem.empty()) fail_op(problem);
  }

  std::uint64_t decimal_index() {
    std::int64_t v = 0;
    check(detail::decode_decimal(line(), false, v));
    return static_cast<std::uint64_t>(v);
  }

  static std::shared_ptr<Value> make(Kind kind) {
    auto v = detail::make_recycled<Value>();
    v->kind = kind;
    return v;
  }

  static const std::shared_ptr<Value>& constant(Kind kind, bool b = false) { return detail::constant(kind, b); }

  void push_int(std::int64_t i) {
    auto v = make(Kind::Int);
    v->integer = i;
    build_.push_scalar(std::move(v));
  }

  void push_bool(bool b) { build_.push_constant(constant(Kind::Bool, b)); }

  void push_float(double d) {
    auto v = make(Kind::Float);
    v->real = d;
    build_.push_scalar(std::move(v));
  }

  void push_text(Kind kind, std::string text) {
    auto v = make(kind);
    v->text = std::move(text);
    build_.push_scalar(std::move(v));
  }

  // LONG1 / LONG4: little-endian two's complement; longer than 8 bytes only with sign bytes.
  void push_long(std::string_view bytes) {
    if (bytes.empty()) return push_int(0);
    const bool negative = (static_cast<unsigned char>(bytes.back()) & 0x80U) != 0;
    std::uint64_t v = negative ? ~std::uint64_t{0} : 0;
    for (std::size_t i = 0; i < bytes.size() && i < 8; ++i) {
      v &= ~(std::uint64_t{0xFF} << (8 * i));
      v |= std::uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
    }
    bool fits = true;
    if (bytes.size() > 8) {
      const unsigned char sign = negative ? 0xFF : 0x00;
      for (std::size_t i = 8; i < bytes.size(); ++i) fits = fits && static_cast<unsigned char>(bytes[i]) == sign;
      fits = fits && ((v >> 63) != 0) == negative;
    }
    if (!fits) fail_op(fmt::format("integer of {} bytes does not fit in 64 bits", bytes.size()));
    push_int(std::bit_cast<std::int64_t>(v));
  }

  // Python 2 str: Python 3's default Unpickler decodes it as ASCII.
  void push_ascii_string(std::string bytes) {
    if (const auto bad = detail::first_non_ascii(bytes); bad != std::string_view::npos) {
      fail_op(
          fmt::format("byte 0x{:02x} at position {} is not ASCII (a Python 2 str; Python 3 decodes these as "
                      "ASCII)",
                      static_cast<unsigned char>(bytes[bad]), bad));
    }
    push_text(Kind::String, std::move(bytes));
  }

  void push_utf8(std::string_view bytes) {
    if (const auto bad = detail::first_invalid_utf8(bytes); bad != std::string_view::npos) {
      fail_op(fmt::format("invalid UTF-8 at position {} of the text (byte 0x{:02x})", bad,
                          static_cast<unsigned char>(bytes[bad])));
    }
    push_text(Kind::String, std::string(bytes));
  }

  [[noreturn]] void refuse_code() const {
    fail(fmt::format("opcode {} (0x{:02x}) would import or call code; refusing", op::name(op_), op_));
  }

  // After EMPTY_DICT while streaming: the dict and the opcodes up to its SETITEMS in one step
  // (pickle_flat_dict.cpp) where they have that shape; false, nothing read, otherwise.
  bool flat_dict() {
    const std::size_t n = detail::scan_flat_dict(in_.peek(kFlatPeek), flat_);
    if (n == 0 || !build_.flat_dict(flat_)) return false;
    in_.advance(n);
    return true;
  }

  // After MARK while streaming: MARK (EMPTY_DICT <flat dict>)* APPENDS, the shape of a snapshot
  // history's batches, in one step (Builder::flat_batch) where the sink takes them all; false,
  // nothing read, otherwise.
  bool flat_batch() {
    const std::string_view w = in_.peek(kBatchPeek);
    if (batch_.size() < kMaxBatch) batch_.resize(kMaxBatch);
    std::size_t p = 0, n = 0;
    while (p < w.size()) {
      const auto code = static_cast<unsigned char>(w[p]);
      if (code == op::kAppends) {
        if (n == 0 || !build_.flat_batch({batch_.data(), n})) return false;
        in_.advance(p + 1);
        return true;
      }
      if (code != op::kEmptyDict || n == kMaxBatch) return false;
      const std::size_t k = detail::scan_flat_dict(w.substr(p + 1), batch_[n]);
      if (k == 0) return false;
      p += 1 + k;
      ++n;
    }
    return false;
  }

  void step();
  ValuePtr stop();

  static constexpr std::size_t kFlatPeek = 512;  // far more than the 16 entries a flat dict may have
  // A pickler's batch is 1000 items (Python's _BATCHSIZE); bigger ones go opcode by opcode. The
  // peek covers 1000 dicts of 16 entries of 10-byte ints.
  static constexpr std::size_t kMaxBatch = 1000;
  static constexpr std::size_t kBatchPeek = std::size_t{256} << 10;

  Input& in_;
  const std::string& name_;
  std::uint64_t op_at_ = 0;  // offset of the current opcode
  unsigned char op_ = 0;
  detail::Builder build_;
  bool streaming_ = false;
  detail::FlatDict flat_;
  std::vector<detail::FlatDict> batch_;  // flat_batch's dicts (sized once)
};

void Reader::step() {
  switch (op_) {
    // ---- framing ----------------------------------------------------------------------
    case op::kProto: {
      const auto version = le(1);
      if (version < 2 || version > 5) {
        fail_op(fmt::format("unsupported pickle protocol {} (coopsim reads protocols 2 to 5)", version));
      }
      return;
    }
    case op::kFrame: {
      // A framing hint only; like CPython, the whole frame must be present.
      const auto size = le(8);
      if (size > left())
        fail_op(fmt::format("frame of {} bytes runs past the end of the input ({} left; truncated?)", size, left()));
      return;
    }
    // ---- scalars ----------------------------------------------------------------------
    case op::kNone: return build_.push_constant(constant(Kind::None));
    case op::kNewTrue: return push_bool(true);
    case op::kNewFalse: return push_bool(false);
    case op::kInt: {
      const std::string_view text = line();
      if (text == "00" || text == "01") return push_bool(text == "01");  // protocol-0 bools
      std::int64_t v = 0;
      check(detail::decode_decimal(text, true, v));
      return push_int(v);
    }
    case op::kLong: {
      std::string_view text = line();
      if (!text.empty() && text.back() == 'L') text.remove_suffix(1);
      std::int64_t v = 0;
      check(detail::decode_decimal(text, true, v));
      return push_int(v);
    }
    case op::kBinInt: return push_int(le_signed32());
    case op::kBinInt1: return push_int(static_cast<std::int64_t>(le(1)));
    case op::kBinInt2: return push_int(static_cast<std::int64_t>(le(2)));
    case op::kLong1: return push_long(take(le(1), "integer"));
    case op::kLong4: {
      const std::int32_t n = le_signed32();
      if (n < 0) fail_op(fmt::format("negative byte count {}", n));
      return push_long(take(static_cast<std::uint64_t>(n), "integer"));
    }
    case op::kFloat: {
      double d = 0.0;
      check(detail::decode_float_text(line(), d));
      return push_float(d);
    }
    case op::kBinFloat: {
      const std::string_view s = take(8);
      std::uint64_t bits = 0;
      for (const char c : s) bits = (bits << 8) | static_cast<unsigned char>(c);  // big-endian
      return push_float(std::bit_cast<double>(bits));
    }
    // ---- text and bytes ---------------------------------------------------------------
    case op::kString: {
      std::string bytes;
      check(detail::decode_quoted_string(line(), bytes));
      return push_ascii_string(std::move(bytes));
    }
    case op::kBinString: {
      const std::int32_t n = le_signed32();
      if (n < 0) fail_op(fmt::format("negative byte count {}", n));
      return push_ascii_string(std::string(take(static_cast<std::uint64_t>(n), "string")));
    }
    case op::kShortBinString: return push_ascii_string(std::string(take(le(1), "string")));
    case op::kUnicode: {
      std::string text;
      check(detail::decode_raw_unicode_escape(line(), text));
      return push_text(Kind::String, std::move(text));
    }
    case op::kBinUnicode: return push_utf8(take(le(4), "string"));
    case op::kShortBinUnicode: return push_utf8(take(le(1), "string"));
    case op::kBinUnicode8: return push_utf8(take(le(8), "string"));
    case op::kBinBytes: return push_text(Kind::Bytes, std::string(take(le(4), "data")));
    case op::kShortBinBytes: return push_text(Kind::Bytes, std::string(take(le(1), "data")));
    case op::kBinBytes8:
    case op::kByteArray8: return push_text(Kind::Bytes, std::string(take(le(8), "data")));
    // ---- structure --------------------------------------------------------------------
    case op::kMark:
      if (streaming_ && flat_batch()) return;
      return build_.mark();
    case op::kPop: return build_.pop();
    case op::kPopMark: return build_.pop_mark();
    case op::kDup: return build_.dup();
    case op::kEmptyList: return build_.push_empty(Kind::List);
    case op::kEmptyDict:
      if (streaming_ && flat_dict()) return;
      return build_.push_empty(Kind::Dict);
    case op::kEmptyTuple: return build_.push_empty(Kind::Tuple);
    case op::kAppend: return build_.append();
    case op::kAppends: return build_.appends();
    case op::kList: return build_.list_from_mark();
    case op::kTuple: return build_.tuple_from_mark();
    case op::kTuple1: return build_.tuple_of(1);
    case op::kTuple2: return build_.tuple_of(2);
    case op::kTuple3: return build_.tuple_of(3);
    case op::kDict: return build_.dict_from_mark();
    case op::kSetItem: return build_.set_item();
    case op::kSetItems: return build_.set_items();
    // ---- memo -------------------------------------------------------------------------
    case op::kMemoize: return build_.memoize();
    case op::kPut: return build_.memo_put(decimal_index());
    case op::kBinPut: return build_.memo_put(le(1));
    case op::kLongBinPut: return build_.memo_put(le(4));
    case op::kGet: return build_.memo_get(decimal_index());
    case op::kBinGet: return build_.memo_get(le(1));
    case op::kLongBinGet: return build_.memo_get(le(4));
    // ---- refused ----------------------------------------------------------------------
    case op::kGlobal:
    case op::kStackGlobal:
    case op::kReduce:
    case op::kBuild:
    case op::kInst:
    case op::kObj:
    case op::kNewObj:
    case op::kNewObjEx:
    case op::kPersId:
    case op::kBinPersId:
    case op::kExt1:
    case op::kExt2:
    case op::kExt4: refuse_code();
    case op::kEmptySet:
    case op::kAddItems:
    case op::kFrozenSet:
      fail(fmt::format("opcode {} (0x{:02x}): sets are not plain data for coopsim's pickle reader; refusing",
                       op::name(op_), op_));
    case op::kNextBuffer:
    case op::kReadonlyBuffer:
      fail(fmt::format("opcode {} (0x{:02x}): out-of-band buffers are not supported; refusing", op::name(op_), op_));
    default: {
      const bool printable = op_ >= 0x21 && op_ < 0x7F;
      fail(fmt::format("unknown opcode 0x{:02x}{}; refusing", op_,
                       printable ? fmt::format(" ('{}')", static_cast<char>(op_)) : ""));
    }
  }
}

ValuePtr Reader::stop() {
  ValuePtr result = build_.finish();
  if (in_.left() != 0) {
    op_at_ = in_.pos();
    fail(fmt::format("{} trailing byte{} after STOP", left(), left() == 1 ? "" : "s"));
  }
  return result;
}

}  // namespace

ValuePtr parse(std::string_view bytes, const std::string& name, MemoryCap& memory) {
  Input in(bytes);
  return Reader(in, name, memory).run();
}

namespace detail {

ValuePtr read_streaming(Input& in, const std::string& name, MemoryCap& memory, const IndexSet& fetched,
                        ItemSink& sink) {
  Reader reader(in, name, memory);
  reader.stream(fetched, sink);
  return reader.run();
}

}  // namespace detail

ValuePtr parse(std::string_view bytes, const std::string& name) {
  MemoryCap memory(Limits::default_max_memory());
  return parse(bytes, name, memory);
}

}  // namespace coopsim::pickle
