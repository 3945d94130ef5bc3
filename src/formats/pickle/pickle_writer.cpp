// The plain-data pickle writer (see pickle_writer.hpp). Opcode bytes come from the reader's
// table (src/formats/pickle/pickle_opcodes.hpp), so reader and writer cannot disagree on them.
#include "coopsim/formats/pickle_writer.hpp"

#include <stdexcept>

#include "pickle_opcodes.hpp"

namespace coopsim::pickle {
namespace {
constexpr std::uint32_t kBatch = 1000;  // items per APPENDS / pairs per SETITEMS (Python's _BATCHSIZE)
}

Writer::Writer() {
  out_.push_back(static_cast<char>(op::kProto));
  out_.push_back(4);
}

void Writer::raw_u32(std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void Writer::raw_int(std::int64_t v) {
  if (v >= 0 && v <= 0xff) {
    out_.push_back(static_cast<char>(op::kBinInt1));
    out_.push_back(static_cast<char>(v));
  } else if (v >= 0 && v <= 0xffff) {
    out_.push_back(static_cast<char>(op::kBinInt2));
    out_.push_back(static_cast<char>(v & 0xff));
    out_.push_back(static_cast<char>((v >> 8) & 0xff));
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    out_.push_back(static_cast<char>(op::kBinInt));
    raw_u32(static_cast<std::uint32_t>(static_cast<std::int32_t>(v)));
  } else {
    // LONG1: the shortest two's-complement little-endian form.
    unsigned char bytes[8];
    const auto u = static_cast<std::uint64_t>(v);
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>((u >> (8 * i)) & 0xff);
    int n = 8;
    while (n > 1 && ((bytes[n - 1] == 0x00 && (bytes[n - 2] & 0x80) == 0) ||
                     (bytes[n - 1] == 0xff && (bytes[n - 2] & 0x80) != 0))) {
      --n;
    }
    out_.push_back(static_cast<char>(op::kLong1));
    out_.push_back(static_cast<char>(n));
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<char>(bytes[i]));
  }
}

void Writer::before_value() {
  if (!open_.empty() && open_.back().pending == 0) out_.push_back(static_cast<char>(op::kMark));
}

void Writer::after_value() {
  if (open_.empty()) return;
  Open& o = open_.back();
  ++o.pending;
  if (o.pending == (o.dict ? 2 * kBatch : kBatch)) {
    out_.push_back(static_cast<char>(o.dict ? op::kSetItems : op::kAppends));
    o.pending = 0;
  }
}

void Writer::boolean(bool v) {
  before_value();
  out_.push_back(static_cast<char>(v ? op::kNewTrue : op::kNewFalse));
  after_value();
}

void Writer::integer(std::int64_t v) {
  before_value();
  raw_int(v);
  after_value();
}

void Writer::int_pair(std::int64_t a, std::int64_t b) {
  before_value();
  raw_int(a);
  raw_int(b);
  out_.push_back(static_cast<char>(op::kTuple2));
  after_value();
}

void Writer::get(std::uint32_t memo_index) {
  if (memo_index <= 0xff) {
    out_.push_back(static_cast<char>(op::kBinGet));
    out_.push_back(static_cast<char>(memo_index));
  } else {
    out_.push_back(static_cast<char>(op::kLongBinGet));
    raw_u32(memo_index);
  }
}

// MEMOIZE stores the top of the stack at the next index (readers count them).
std::uint32_t Writer::memoize() {
  out_.push_back(static_cast<char>(op::kMemoize));
  return memo_size_++;
}

void Writer::text(std::string_view s) {
  before_value();
  if (const auto it = memo_.find(s); it != memo_.end()) {
    get(it->second);
  } else {
    if (s.size() <= 0xff) {
      out_.push_back(static_cast<char>(op::kShortBinUnicode));
      out_.push_back(static_cast<char>(s.size()));
    } else {
      out_.push_back(static_cast<char>(op::kBinUnicode));
      raw_u32(static_cast<std::uint32_t>(s.size()));
    }
    out_.append(s);
    memo_.emplace(std::string(s), memoize());
  }
  after_value();
}

void Writer::begin_dict() {
  before_value();
  out_.push_back(static_cast<char>(op::kEmptyDict));
  open_.push_back({true, 0});
}

void Writer::begin_list() {
  before_value();
  out_.push_back(static_cast<char>(op::kEmptyList));
  open_.push_back({false, 0});
}

// The list is memoized while empty, right after EMPTY_LIST and before any batch could move it
// off the top of the stack (Python's pickler does the same).
std::uint32_t Writer::begin_shared_list() {
  begin_list();
  return memoize();
}

void Writer::shared(std::uint32_t memo_index) {
  if (memo_index >= memo_size_) throw std::logic_error("pickle writer: shared() of an index never memoized");
  before_value();
  get(memo_index);
  after_value();
}

void Writer::end() {
  if (open_.empty()) throw std::logic_error("pickle writer: end() without an open container");
  const Open o = open_.back();
  if (o.dict && o.pending % 2 != 0) throw std::logic_error("pickle writer: a dict key without a value");
  if (o.pending > 0) out_.push_back(static_cast<char>(o.dict ? op::kSetItems : op::kAppends));
  open_.pop_back();
  after_value();
}

std::string Writer::finish() {
  if (!open_.empty()) throw std::logic_error("pickle writer: finish() with an open container");
  out_.push_back(static_cast<char>(op::kStop));
  return std::move(out_);
}

}  // namespace coopsim::pickle
