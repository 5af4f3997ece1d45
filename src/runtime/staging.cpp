#include "src/runtime/staging.hpp"

#include <stdexcept>
#include <string>
#include <type_traits>

#include "src/runtime/element_types.hpp"
#include "src/runtime/parallel_for.hpp"
#include "src/simd/widen_halves.hpp"

#include "seqattn/error.hpp"

namespace seqattn::detail {
namespace {

// Row r of a [B, H, S, D] view (rows in b, h, s order).
template <class T>
T* row_of(const TensorView<T>& v, std::int64_t r) {
  const auto& n = v.shape;
  return v.ptr(r / (n[1] * n[2]), r / n[2] % n[1], r % n[2]);
}

// dst = src converted (convert_element) over any strides, rows spread over the threads when the
// copy is large (a staging pass over a 4096 × 512 tensor is ~8 ms on one core). A contiguous half
// source row is widened with SIMD (widen_halves.cc).
template <class Src, class Dst>
void copy_view(const TensorView<const Src>& src, const TensorView<Dst>& dst) {
  const auto& n = src.shape;
  const std::int64_t rows = n[0] * n[1] * n[2], dim = n[3];
  auto copy_row = [&](std::int64_t r) {
    const Src* from = row_of(src, r);
    Dst* to = row_of(dst, r);
    if constexpr (std::is_same_v<Dst, float> && !std::is_same_v<Src, float>) {
      if (src.strides[3] == 1 && dst.strides[3] == 1) {
        if constexpr (std::is_same_v<Src, bfloat16>) {
          widen_bf16(from, to, dim);
        } else {
          widen_f16(from, to, dim);
        }
        return;
      }
    }
    for (std::int64_t d = 0; d < dim; ++d)
      to[d * dst.strides[3]] = convert_element<Dst>(from[d * src.strides[3]]);
  };
  // A small copy (a decode step's q and out) stays on the calling thread, allocating nothing.
  for_each_index(rows, rows * dim > (std::int64_t{1} << 16), copy_row);
}

}  // namespace

ByteRange bind_any(const std::string& name, const AnyConstTensor& view,
                   const std::array<std::int64_t, 4>& planned) {
  check_tensor_dtype(name, view.dtype);
  const ByteRange range =
      check_view(name, view.data, view.shape, view.strides, dtype_size(view.dtype));
  if (view.shape != planned) {
    fail(name + ".shape", shape_text(planned) + " (as planned)", shape_text(view.shape),
         "make a plan for this shape");
  }
  return range;
}

void widen_to(const AnyConstTensor& src, float* dst) {
  const auto& n = src.shape;
  visit_element(src.dtype, [&](auto elem) {
    copy_view(src.as<decltype(elem)>(), bhsd(dst, n[0], n[1], n[2], n[3]));
  });
}

void narrow_into(const ConstTensor& src, const AnyTensor& dst) {
  visit_element(dst.dtype, [&](auto elem) { copy_view(src, dst.as<decltype(elem)>()); });
}

ConstTensor F32Staging::input(const char* name, const AnyConstTensor& view,
                              const std::array<std::int64_t, 4>& planned, bool round_f32_to_bf16) {
  ranges_.add(name, bind_any(name, view, planned));
  const bool rounds = round_f32_to_bf16 && view.dtype == DType::kF32;
  if (view.dtype == DType::kF32 && !rounds) return view.as<float>();
  const auto& n = view.shape;
  float* copy = allocate(name, n);
  widen_to(view, copy);
  if (rounds) {
    const std::int64_t count = n[0] * n[1] * n[2] * n[3];  // checked by allocate()
    for (std::int64_t i = 0; i < count; ++i) copy[i] = static_cast<float>(bfloat16(copy[i]));
  }
  return bhsd<const float>(copy, n[0], n[1], n[2], n[3]);
}

Tensor F32Staging::output(const AnyTensor& out, const std::array<std::int64_t, 4>& planned,
                          const RunArgs& args) {
  const ByteRange ro = bind_any("out", out, planned);
  check_no_self_overlap("out", out.shape, out.strides);
  NamedRanges others = ranges_;
  add_mask_ranges(others, args.keep, args.bias);
  check_output_disjoint("out", ro, others);
  others.add("out", ro);
  if (args.weights) {
    const Tensor& w = *args.weights;
    check_output_disjoint("weights",
                          check_view("weights", w.data, w.shape, w.strides, sizeof(float)), others);
  }
  if (args.lse) {
    const Tensor& l = *args.lse;
    check_output_disjoint("lse", check_view("lse", l.data, l.shape, l.strides, sizeof(float)),
                          others);
  }
  out_ = out;
  if (out.dtype == DType::kF32) return staged_ = out.as<float>();
  const auto& n = out.shape;
  return staged_ = bhsd(allocate("out", n), n[0], n[1], n[2], n[3]);
}

float* F32Staging::allocate(const std::string& name, const std::array<std::int64_t, 4>& shape) {
  // The argument's own name: building a longer one here would allocate on every run.
  const auto count =
      static_cast<size_t>(checked_product({shape[0], shape[1], shape[2], shape[3]}, name));
  if (!arena_.empty()) {
    const size_t taken = (count + 15) / 16 * 16;  // the next copy stays 64-byte aligned
    if (taken > arena_.size()) {
      throw std::logic_error("seqattn: the fp32 staging of " + name +
                             " does not fit the plan's workspace (a bug in its sizing)");
    }
    float* copy = arena_.data();
    arena_ = arena_.subspan(taken);
    return copy;
  }
  buffers_.push_back(hwy::AllocateAligned<float>(count));
  if (buffers_.back() == nullptr) {
    throw Error(ErrorKind::kInvalidArgument, name, "an fp32 staging copy that fits in memory",
                shape_text(shape), "half-precision arguments are staged in fp32");
  }
  return buffers_.back().get();
}

void F32Staging::finish() const {
  if (out_.dtype != DType::kF32) narrow_into(staged_, out_);
}

}  // namespace seqattn::detail
