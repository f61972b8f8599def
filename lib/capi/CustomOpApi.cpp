// mstep_custom_op_register and mstep_custom_op_call: the C form of custom
// ops (mstep/runtime/CustomOp.h). A C definition becomes a CustomOpDef whose
// shape rule and host kernels call the host's function pointers, with the
// tensor types and the attributes in C form.
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/capi/Handles.h"
#include "mstep/api/CustomOp.h"
#include "mstep/core/Error.h"

using namespace mstep;
using namespace mstep::capi;

namespace {

absl::StatusCode to_absl(mstep_status_code code) {
  switch (code) {
  case MSTEP_OK: return absl::StatusCode::kOk;
  case MSTEP_INVALID_ARGUMENT: return absl::StatusCode::kInvalidArgument;
  case MSTEP_NOT_FOUND: return absl::StatusCode::kNotFound;
  case MSTEP_FAILED_PRECONDITION: return absl::StatusCode::kFailedPrecondition;
  case MSTEP_OUT_OF_RANGE: return absl::StatusCode::kOutOfRange;
  case MSTEP_UNIMPLEMENTED: return absl::StatusCode::kUnimplemented;
  case MSTEP_DATA_LOSS: return absl::StatusCode::kDataLoss;
  case MSTEP_RESOURCE_EXHAUSTED: return absl::StatusCode::kResourceExhausted;
  default: return absl::StatusCode::kInternal;
  }
}

/// Takes ownership of a status a host callback returned: OK for NULL.
absl::Status take_status(mstep_status* status, const char* what) {
  if (status == nullptr) return absl::OkStatus();
  absl::StatusCode code = to_absl(mstep_status_code_of(status));
  if (code == absl::StatusCode::kOk) code = absl::StatusCode::kInternal; // MSTEP_OK is no failure
  absl::Status out(code, mstep_status_message(status));
  mstep_status_free(status);
  if (out.message().empty()) return absl::Status(code, absl::StrCat("the ", what, " failed"));
  return out;
}

mstep_tensor_type to_c(const TensorType& t) {
  mstep_tensor_type out{};
  out.dtype = to_c_dtype(t.dtype);
  out.rank = static_cast<size_t>(t.shape.rank());
  for (size_t i = 0; i < out.rank; ++i) out.dims[i] = t.shape[static_cast<int64_t>(i)];
  return out;
}

std::vector<mstep_tensor_type> to_c(absl::Span<const TensorType> types) {
  std::vector<mstep_tensor_type> out;
  for (const TensorType& t : types) out.push_back(to_c(t));
  return out;
}

absl::StatusOr<TensorType> from_c(const mstep_tensor_type& t, size_t i) {
  const int v = static_cast<int>(t.dtype);
  if (v < 0 || v >= kNumDTypes)
    return absl::InvalidArgumentError(absl::StrCat("the rule gave output ", i, " dtype ", v,
                                                   ", not an mstep_dtype"));
  if (t.rank > MSTEP_MAX_RANK)
    return absl::InvalidArgumentError(absl::StrCat("the rule gave output ", i, " rank ", t.rank,
                                                   "; at most ", MSTEP_MAX_RANK));
  for (size_t d = 0; d < t.rank; ++d)
    if (t.dims[d] < 0)
      return absl::InvalidArgumentError(
          absl::StrCat("the rule gave output ", i, " a negative dim ", t.dims[d]));
  return TensorType{Shape(absl::MakeConstSpan(t.dims, t.rank)), static_cast<DType>(t.dtype)};
}

mstep_attr_kind kind_of(CustomAttrType type) {
  switch (type) {
  case CustomAttrType::int64: return MSTEP_ATTR_INT;
  case CustomAttrType::float64: return MSTEP_ATTR_FLOAT;
  case CustomAttrType::boolean: return MSTEP_ATTR_BOOL;
  case CustomAttrType::int_list: return MSTEP_ATTR_INTS;
  case CustomAttrType::string: return MSTEP_ATTR_STRING;
  case CustomAttrType::dtype: return MSTEP_ATTR_DTYPE;
  }
  return MSTEP_ATTR_INT;
}

/// The attributes of one call in C form; the strings and lists the
/// mstep_attr entries point to live as long as this object.
class CAttrs {
public:
  CAttrs(absl::Span<const CustomAttrSpec> specs, const CustomAttrView& view) {
    values_.reserve(specs.size());
    for (const CustomAttrSpec& spec : specs) {
      absl::StatusOr<CustomAttrValue> v = view.get(spec.name);
      if (!v.ok()) {
        status_ = v.status();
        return;
      }
      values_.push_back(*std::move(v));
    }
    for (size_t i = 0; i < specs.size(); ++i) {
      mstep_attr a{};
      a.name = specs[i].name.c_str();
      a.kind = kind_of(specs[i].type);
      const CustomAttrValue& v = values_[i];
      if (const auto* x = std::get_if<int64_t>(&v)) a.i = *x;
      if (const auto* x = std::get_if<double>(&v)) a.f = *x;
      if (const auto* x = std::get_if<bool>(&v)) a.i = *x ? 1 : 0;
      if (const auto* x = std::get_if<DType>(&v)) a.i = static_cast<int64_t>(to_c_dtype(*x));
      if (const auto* x = std::get_if<IntList>(&v)) {
        a.ints = x->data();
        a.num_ints = x->size();
      }
      if (const auto* x = std::get_if<std::string>(&v)) a.s = x->c_str();
      attrs_.push_back(a);
    }
  }
  const absl::Status& status() const { return status_; }
  const mstep_attr* data() const { return attrs_.data(); }
  size_t size() const { return attrs_.size(); }

private:
  std::vector<CustomAttrValue> values_; // never reallocated after the pointers are taken
  std::vector<mstep_attr> attrs_;
  absl::Status status_;
};

/// A C attribute as a typed value; `what` names it in errors.
CustomAttrValue value_of(const mstep_attr& a, const std::string& what) {
  switch (static_cast<int>(a.kind)) {
  case MSTEP_ATTR_INT: return a.i;
  case MSTEP_ATTR_FLOAT: return a.f;
  case MSTEP_ATTR_BOOL: return a.i != 0;
  case MSTEP_ATTR_INTS:
    if (a.num_ints > 0 && a.ints == nullptr)
      fail(MSTEP_INVALID_ARGUMENT, absl::StrCat(what, " has num_ints ", a.num_ints,
                                                " but ints is NULL"));
    return IntList(a.ints, a.ints + a.num_ints);
  case MSTEP_ATTR_DTYPE: return to_dtype(static_cast<mstep_dtype>(a.i), what.c_str());
  case MSTEP_ATTR_STRING:
    if (a.s == nullptr) fail(MSTEP_INVALID_ARGUMENT, absl::StrCat(what, " is a NULL string"));
    return std::string(a.s);
  default:
    fail(MSTEP_INVALID_ARGUMENT,
         absl::StrCat(what, " has kind ", static_cast<int>(a.kind), ", not an mstep_attr_kind"));
  }
}

CustomAttrType type_of(mstep_attr_kind kind, const std::string& what) {
  switch (static_cast<int>(kind)) {
  case MSTEP_ATTR_INT: return CustomAttrType::int64;
  case MSTEP_ATTR_FLOAT: return CustomAttrType::float64;
  case MSTEP_ATTR_BOOL: return CustomAttrType::boolean;
  case MSTEP_ATTR_INTS: return CustomAttrType::int_list;
  case MSTEP_ATTR_DTYPE: return CustomAttrType::dtype;
  case MSTEP_ATTR_STRING: return CustomAttrType::string;
  default:
    fail(MSTEP_INVALID_ARGUMENT,
         absl::StrCat(what, " has kind ", static_cast<int>(kind), ", not an mstep_attr_kind"));
  }
}

/// `count` entries at `p`, which may be NULL only when count is 0.
template <typename T> absl::Span<const T> span_of(const T* p, size_t count, const char* what) {
  if (count > 0 && p == nullptr)
    fail(MSTEP_INVALID_ARGUMENT, absl::StrCat(what, " is NULL but its count is ", count));
  return absl::MakeConstSpan(p, count);
}

std::string str_of(const char* s) { return s ? s : ""; }

CustomOpSchema schema_of(const mstep_custom_op_def& def) {
  CustomOpSchema schema;
  for (const mstep_custom_input& in : span_of(def.inputs, def.num_inputs, "def->inputs")) {
    CustomInputSpec spec{str_of(in.name), {}};
    for (mstep_dtype d : span_of(in.dtypes, in.num_dtypes, "an input's dtypes"))
      spec.dtypes.push_back(to_dtype(d, "an input's dtype"));
    schema.inputs.push_back(std::move(spec));
  }
  for (const mstep_custom_attr_decl& a : span_of(def.attrs, def.num_attrs, "def->attrs")) {
    if (a.name == nullptr) fail(MSTEP_INVALID_ARGUMENT, "an attribute of def->attrs has no name");
    const std::string what = absl::StrCat("attribute '", a.name, "'");
    CustomAttrSpec spec{a.name, type_of(a.kind, what), std::nullopt};
    if (a.default_value) spec.default_value = value_of(*a.default_value, what + "'s default");
    schema.attrs.push_back(std::move(spec));
  }
  schema.num_outputs = static_cast<int>(def.num_outputs);
  const absl::Span<const int64_t> pairs = span_of(def.aliases, 2 * def.num_aliases, "def->aliases");
  for (size_t i = 0; i < def.num_aliases; ++i)
    schema.aliases.push_back(
        {static_cast<int>(pairs[2 * i]), static_cast<int>(pairs[2 * i + 1])});
  schema.deterministic = def.nondeterministic == 0;
  return schema;
}

CustomShapeRule shape_rule_of(mstep_custom_shape_fn fn, void* user_data,
                              std::vector<CustomAttrSpec> specs, size_t num_outputs) {
  return [=](absl::Span<const TensorType> inputs,
             const CustomAttrView& view) -> absl::StatusOr<std::vector<TensorType>> {
    CAttrs attrs(specs, view);
    MSTEP_RETURN_IF_ERROR(attrs.status());
    const std::vector<mstep_tensor_type> in = to_c(inputs);
    std::vector<mstep_tensor_type> out(num_outputs);
    MSTEP_RETURN_IF_ERROR(take_status(fn(user_data, in.data(), in.size(), attrs.data(),
                                         attrs.size(), out.data(), out.size()),
                                      "shape rule"));
    std::vector<TensorType> types;
    for (size_t i = 0; i < out.size(); ++i) {
      MSTEP_ASSIGN_OR_RETURN(TensorType t, from_c(out[i], i));
      types.push_back(std::move(t));
    }
    return types;
  };
}

std::shared_ptr<const CustomKernel> kernel_of(mstep_custom_kernel_fn fn, void* user_data,
                                              std::vector<CustomAttrSpec> specs) {
  return host_kernel([=](const HostKernelCall& call) {
    CAttrs attrs(specs, call.attrs);
    MSTEP_RETURN_IF_ERROR(attrs.status());
    const std::vector<mstep_tensor_type> in = to_c(call.input_types);
    const std::vector<mstep_tensor_type> out = to_c(call.output_types);
    return take_status(fn(user_data, call.inputs.data(), in.data(), in.size(),
                          call.outputs.data(), out.data(), out.size(), attrs.data(),
                          attrs.size()),
                       "kernel");
  });
}

}  // namespace

mstep_status* mstep_custom_op_register(const mstep_custom_op_def* def) {
  return guard(__func__, [&] {
    if (def == nullptr) fail(MSTEP_INVALID_ARGUMENT, "def is NULL");
    if (def->name == nullptr || def->name[0] == '\0')
      fail(MSTEP_INVALID_ARGUMENT, "def->name is empty; name the op");
    const std::string name = def->name;
    if (def->shape_rule == nullptr)
      fail(MSTEP_INVALID_ARGUMENT,
           absl::StrCat("custom op '", name, "' has no shape rule; set def->shape_rule"));
    CustomOpDef cpp;
    cpp.name = name;
    cpp.version = def->version;
    cpp.schema = schema_of(*def);
    cpp.shape_rule = shape_rule_of(def->shape_rule, def->shape_user_data, cpp.schema.attrs,
                                   def->num_outputs);
    for (const mstep_custom_kernel& k : span_of(def->kernels, def->num_kernels, "def->kernels")) {
      if (k.backend == nullptr || k.fn == nullptr)
        fail(MSTEP_INVALID_ARGUMENT, absl::StrCat("custom op '", name, "': a kernel has a NULL ",
                                                  k.backend ? "fn" : "backend"));
      cpp.kernels.emplace_back(k.backend, kernel_of(k.fn, k.user_data, cpp.schema.attrs));
    }
    absl::Status s = CustomOpRegistry::global().add(std::move(cpp));
    if (absl::IsAlreadyExists(s)) fail(MSTEP_FAILED_PRECONDITION, std::string(s.message()));
    throw_if_error(s);
  });
}

mstep_status* mstep_custom_op_call(mstep_context* context, const char* name, int64_t version,
                                   mstep_tensor* const* inputs, size_t num_inputs,
                                   const mstep_attr* attrs, size_t num_attrs,
                                   mstep_tensor** outputs, size_t capacity,
                                   size_t* out_num_outputs) {
  return guard(__func__, [&] {
    check_handle(context, HandleKind::context, "context");
    require_out(out_num_outputs, "out_num_outputs");
    if (name == nullptr) fail(MSTEP_INVALID_ARGUMENT, "name is NULL; name the custom op");
    std::vector<Tensor> operands = tensors_of(inputs, num_inputs, "inputs", false);
    CustomAttrs call_attrs;
    for (const mstep_attr& a : span_of(attrs, num_attrs, "attrs")) {
      if (a.name == nullptr) fail(MSTEP_INVALID_ARGUMENT, "an attribute has a NULL name");
      call_attrs.push_back({a.name, value_of(a, absl::StrCat("attribute '", a.name, "'"))});
    }
    std::vector<Tensor> results = custom_op(CustomOpRef(name, version), operands, call_attrs);
    write_outputs(context, results, outputs, capacity);
    *out_num_outputs = results.size();
  });
}
