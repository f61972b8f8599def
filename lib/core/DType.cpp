// DType names, sizes and PyTorch's promotion table.
#include "mstep/core/DType.h"

namespace mstep {

absl::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::boolean: return "bool";
  }
  return "?";
}

size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::boolean: return 1;
  }
  return 0;
}

int dtype_category(DType d) {
  if (d == DType::boolean) return 0;
  if (is_integral(d)) return 1;
  return 2;
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::boolean) return b;
  if (b == DType::boolean) return a;
  const bool fa = is_floating(a), fb = is_floating(b);
  if (fa != fb) return fa ? a : b;  // float beats int
  if (!fa) return DType::i64;       // i32 with i64
  // Two different floating types. bf16 with f16 is f32 (as in PyTorch);
  // otherwise the wider one wins.
  if ((a == DType::bf16 && b == DType::f16) ||
      (a == DType::f16 && b == DType::bf16))
    return DType::f32;
  return element_size(a) >= element_size(b) ? a : b;
}

}  // namespace mstep
