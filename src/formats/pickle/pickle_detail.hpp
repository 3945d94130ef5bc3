// Internals of the pickle reader shared by src/import/pickle*.cpp: decoders for the text forms
// of protocol-0 opcodes, UTF-8 checking, and Python's dict-key hashing and equality.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coopsim/formats/pickle.hpp"

namespace coopsim::pickle::detail {

// Each decoder returns an empty string on success, else the problem in words.

// INT / LONG / GET / PUT text: "-"? digits, no leading zeros (except "0"); within int64.
std::string decode_decimal(std::string_view text, bool allow_minus, std::int64_t& out);
// FLOAT text as Python's float() reads repr() output: decimal or exponent form, inf, nan.
std::string decode_float_text(std::string_view text, double& out);
// STRING argument: the quoted text without its newline; strips the quotes and undoes
// Python's bytes escapes (codecs.escape_decode). The result is raw bytes.
std::string decode_quoted_string(std::string_view text, std::string& out);
// UNICODE argument: raw-unicode-escape (latin-1 bytes plus \uXXXX and \UXXXXXXXX) to UTF-8.
std::string decode_raw_unicode_escape(std::string_view text, std::string& out);
// Offset of the first byte that is not ASCII, or npos.
std::size_t first_non_ascii(std::string_view bytes);
// Offset of the first byte that makes `bytes` invalid UTF-8 for Python's decoder with
// errors="surrogatepass" (encoded surrogates U+D800..U+DFFF allowed), or npos.
std::size_t first_invalid_utf8(std::string_view bytes);

// Hash consistent with key_equal(): numbers that compare equal hash alike.
// For None, bool, int, float, str and bytes.
std::uint64_t hash_scalar(const Value& v);
// A tuple's hash: start from tuple_hash_seed(size) and fold in each item's hash in order.
std::uint64_t tuple_hash_seed(std::size_t size);
std::uint64_t hash_combine(std::uint64_t h, std::uint64_t item);
// Python's == for dict keys: identity first, then by value (numbers across bool / int / float
// exactly; tuples item by item; lists and dicts only equal themselves). Iterative. Each node
// pair compared costs one unit of `budget`; std::nullopt when the budget runs out.
std::optional<bool> key_equal(const Value* a, const Value* b, std::uint64_t& budget);
// None, True and False are never changed: one value each, shared by every pickle (pickle.cpp).
const std::shared_ptr<Value>& constant(Value::Kind kind, bool b = false);

// Room for `more` elements, growing geometrically: a list filled by many APPENDS batches (a
// pickler writes 1000 items per batch) must not be copied whole at every batch.
template <class T>
void grow_for(std::vector<T>& v, std::size_t more) {
  if (v.capacity() - v.size() >= more) return;
  v.reserve(std::max(v.size() + more, 2 * v.capacity()));
}

}  // namespace coopsim::pickle::detail
