// The compiled part of {fmt} 9 (the functions its headers declare but define in format-inl.h),
// built here so that a statically linked coopsim needs no libfmt.so: Debian ships fmt as a shared
// library only. Only used with -Dstatic_cli (meson.build); the explicit instantiations are the
// templates the executable's objects reference (`nm -u`), as {fmt}'s own build instantiates them.
#include <fmt/format-inl.h>

namespace fmt {
inline namespace v9 {
namespace detail {
template auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
template auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template auto decimal_point_impl(locale_ref loc) -> char;
template auto thousands_sep_impl(locale_ref loc) -> thousands_sep_result<char>;
}  // namespace detail
}  // namespace v9
}  // namespace fmt
