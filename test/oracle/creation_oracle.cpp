// Oracle registrations: the *_like creation ops, tensors from host data
// (from_vector, from_buffer) and the value-dependent ops (nonzero,
// masked_select).
#include <cstring>

#include "mstep/core/HalfTypes.h"
#include "test/oracle/OracleCase.h"

namespace mstep::oracle {
namespace {

using V = std::vector<Tensor>;

/// The bytes of `t`'s values laid out as its dtype, as a host would hold them.
std::vector<unsigned char> host_bytes(const HostTensor& t) {
  std::vector<unsigned char> bytes(TensorType{t.shape, t.dtype}.bytes());
  auto put = [&bytes](size_t i, auto value) {
    std::memcpy(bytes.data() + i * sizeof(value), &value, sizeof(value));
  };
  for (size_t i = 0; i < t.values.size(); ++i) {
    const double x = t.values[i];
    switch (t.dtype) {
      case DType::f32: put(i, static_cast<float>(x)); break;
      case DType::f64: put(i, x); break;
      case DType::bf16: put(i, BFloat16(static_cast<float>(x))); break;
      case DType::f16: put(i, Float16(static_cast<float>(x))); break;
      case DType::i32: put(i, static_cast<int32_t>(x)); break;
      case DType::i64: put(i, static_cast<int64_t>(x)); break;
      case DType::boolean: put(i, static_cast<bool>(x != 0)); break;
    }
  }
  return bytes;
}

MSTEP_ORACLE_OP("zeros_like", [](const OracleCase& c) { return V{zeros_like(c.in(0))}; });
MSTEP_ORACLE_OP("ones_like", [](const OracleCase& c) { return V{ones_like(c.in(0))}; });
MSTEP_ORACLE_OP("full_like", [](const OracleCase& c) { return V{full_like(c.in(0), c.scalar())}; });
// OracleCase::in builds every input with from_vector; this case names it.
MSTEP_ORACLE_OP("from_vector", [](const OracleCase& c) { return V{c.in(0)}; });
MSTEP_ORACLE_OP("from_buffer", [](const OracleCase& c) {
  const HostTensor& t = c.inputs.at(0);
  const std::vector<unsigned char> bytes = host_bytes(t);
  return V{from_buffer(bytes.data(), TensorType{t.shape, t.dtype})};
});
MSTEP_ORACLE_OP("nonzero", [](const OracleCase& c) { return V{nonzero(c.in(0))}; });
MSTEP_ORACLE_OP("masked_select", [](const OracleCase& c) {
  return V{masked_select(c.in(0), c.in(1))};
});

}  // namespace
}  // namespace mstep::oracle
