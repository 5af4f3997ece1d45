#include "src/runtime/checked_size.hpp"

#include <sstream>

#include "seqattn/error.hpp"

namespace seqattn::detail {

std::int64_t checked_product(std::initializer_list<std::int64_t> factors,
                             std::string_view argument) {
  return checked_product(factors, argument, {});
}

std::int64_t checked_product(std::initializer_list<std::int64_t> factors, std::string_view argument,
                             std::string_view suffix) {
  std::int64_t product = 1;
  bool fits = true;
  for (const std::int64_t f : factors) {
    fits = fits && f >= 0 && !__builtin_mul_overflow(product, f, &product) &&
           product <= (std::int64_t{1} << 62);
  }
  if (!fits) {
    std::string text;
    for (const std::int64_t f : factors) text += (text.empty() ? "" : " x ") + std::to_string(f);
    throw Error(ErrorKind::kInvalidArgument, std::string(argument) + std::string(suffix),
                "sizes whose product fits in 2^62", text);
  }
  return product;
}

void fail_allocation(const std::string& argument, double bytes) {
  std::ostringstream actual;
  actual << bytes << " bytes could not be allocated";
  throw Error(ErrorKind::kInvalidArgument, argument, "a size that fits in memory", actual.str(),
              "use smaller extents");
}

}  // namespace seqattn::detail
