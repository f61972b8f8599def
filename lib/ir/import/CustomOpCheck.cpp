// The registry check of the mstep.custom verifier (ir/dialect/
// CustomOpCheck.h), installed when libmstep_compiler loads: the op named
// by `op_name` and `version` must be registered in this process, and a
// call of it must be one the tracer would have accepted: the schema's
// input count and dtypes and attributes, and result types equal to what
// the op's shape rule gives for these inputs and attributes.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ir/import/CustomOpAttrs.h"
#include "mstep/ir/dialect/CustomOpCheck.h"

namespace mstep {

namespace {

std::string type_list(const std::vector<TensorType>& types) {
  std::vector<std::string> names;
  for (const TensorType& t : types) names.push_back(t.to_string());
  return absl::StrCat("(", absl::StrJoin(names, ", "), ")");
}

/// The mstep types of `types`, or the first that has none.
absl::StatusOr<std::vector<TensorType>> tensor_types(mlir::TypeRange types) {
  std::vector<TensorType> out;
  for (mlir::Type t : types) {
    absl::StatusOr<TensorType> type = to_tensor_type(t);
    if (!type.ok()) return type.status();
    out.push_back(*type);
  }
  return out;
}

llvm::LogicalResult check_registered(dialect::CustomOp op) {
  const std::string name = op.getOpName().str();
  const int64_t version = custom_op_version(op);
  auto found = CustomOpRegistry::global().find(name, version);
  if (!found.ok()) {
    auto diag = op.emitOpError() << "custom op '" << name << "' version " << version
                                 << " is not registered in this process";
    if (auto other = CustomOpRegistry::global().find(name); other.ok())
      diag << " (it has version " << (*other)->version << ")";
    return diag << "; load the library that registers it (mstep-opt --load-plugin "
                   "libmyops.so) or register it before parsing";
  }
  const CustomOp& custom = **found;
  const std::string label = absl::StrCat("custom op '", custom.label(), "'");
  absl::StatusOr<std::vector<TensorType>> inputs = tensor_types(op.getInputs().getTypes());
  absl::StatusOr<std::vector<TensorType>> results = tensor_types(op.getResults().getTypes());
  if (!inputs.ok() || !results.ok())
    return op.emitOpError() << label << ": "
                            << std::string((inputs.ok() ? results : inputs).status().message());
  const CustomOpSchema& schema = custom.schema;
  if (inputs->size() != schema.inputs.size())
    return op.emitOpError() << label << " takes " << schema.inputs.size() << " inputs "
                            << to_string(schema) << "; this call has " << inputs->size();
  for (size_t j = 0; j < inputs->size(); ++j) {
    const std::vector<DType>& allowed = schema.inputs[j].dtypes;
    const DType dtype = (*inputs)[j].dtype;
    if (allowed.empty() || std::find(allowed.begin(), allowed.end(), dtype) != allowed.end())
      continue;
    std::vector<std::string> names;
    for (DType d : allowed) names.push_back(std::string(dtype_name(d)));
    return op.emitOpError() << label << ": input " << j << " ('" << schema.inputs[j].name
                            << "') must be " << absl::StrJoin(names, "|") << ", got "
                            << std::string(dtype_name(dtype));
  }
  AttrList attrs;
  if (absl::Status s = append_custom_attrs(op, custom, attrs); !s.ok())
    return op.emitOpError() << std::string(s.message());
  absl::StatusOr<std::vector<TensorType>> expected =
      custom.shape_rule(*inputs, CustomAttrView(schema.attrs, attrs));
  if (!expected.ok())
    return op.emitOpError() << label << " refuses inputs " << type_list(*inputs) << ": "
                            << std::string(expected.status().message());
  if (*expected != *results)
    return op.emitOpError() << label << " gives results " << type_list(*expected)
                            << " for these inputs and attributes; the op has "
                            << type_list(*results);
  return mlir::success();
}

[[maybe_unused]] const bool installed =
    (dialect::set_custom_op_checker(&check_registered), true);

} // namespace

} // namespace mstep
