// An oracle case parsed from the file generate_cases.py writes, and the
// registry that maps an op name to the mstep call that computes it.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "mstep/mstep.h"

namespace mstep::oracle {

struct HostTensor {
  DType dtype;
  Shape shape;
  std::vector<double> values;
  /// An expected output's own tolerance (tolerance.py's family rule at its
  /// dtype): |got - want| <= atol + rtol * |want|. Zero: exact.
  double rtol = 0, atol = 0;
};

struct OracleCase {
  std::string name, op;
  std::map<std::string, std::vector<std::string>> attrs;
  std::vector<HostTensor> inputs, expected;

  /// Input i as a materialized mstep tensor on the default device (the
  /// bound tensor when the harness set one, e.g. one requiring grad).
  Tensor in(size_t i) const;
  std::vector<Tensor> bound;
  bool has(const std::string& key) const { return attrs.count(key) > 0; }
  int64_t attr_int(const std::string& key) const;
  int64_t attr_int(const std::string& key, int64_t fallback) const;
  double attr_double(const std::string& key) const;
  double attr_double(const std::string& key, double fallback) const;
  std::vector<int64_t> attr_ints(const std::string& key) const;
  std::string attr_str(const std::string& key, const std::string& fallback = "") const;
  /// A torch dtype name ("float32", "int64", "bool", ...) as a DType.
  DType attr_dtype(const std::string& key) const;
  /// The "scalar" attr as an mstep Scalar; "kind" int/bool/float.
  Scalar scalar() const;
};

using OracleFn = std::function<std::vector<Tensor>(const OracleCase&)>;

/// op name -> mstep call. Each *_oracle.cpp file registers its family.
std::map<std::string, OracleFn>& registry();

struct Registrar {
  Registrar(const std::string& op, OracleFn fn) { registry()[op] = std::move(fn); }
};

}  // namespace mstep::oracle

#define MSTEP_ORACLE_CONCAT2(a, b) a##b
#define MSTEP_ORACLE_CONCAT(a, b) MSTEP_ORACLE_CONCAT2(a, b)
/// MSTEP_ORACLE_OP("add", [](const OracleCase& c) -> std::vector<Tensor> {...});
#define MSTEP_ORACLE_OP(name, fn)                                         \
  static ::mstep::oracle::Registrar MSTEP_ORACLE_CONCAT(oracle_reg_, __COUNTER__)( \
      name, fn)
