// The device-side error word: see CudaErrorWord.h.
#include "lib/backends/cuda/CudaErrorWord.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace mstep::cuda::error_word {

namespace {

/// "kernel <name> (<origin>)" of the op numbered `op`, or the plan's first
/// kernel whose origin names `op_name`.
std::string kernel_of(const CudaPlan& plan, int64_t op, absl::string_view op_name) {
  const std::string suffix = absl::StrCat(" #", op);
  for (const CudaKernelInfo& k : plan.kernels)
    if (absl::EndsWith(k.origin, suffix))
      return absl::StrCat("kernel ", k.name, " (", k.origin, ")");
  for (const CudaKernelInfo& k : plan.kernels)
    if (absl::StrContains(k.origin, op_name))
      return absl::StrCat("kernel ", k.name, " (", k.origin, ")");
  return "a kernel of the step";
}

}  // namespace

absl::Status decode(const CudaPlan& plan, const int64_t (&word)[kWords]) {
  if (word[kCodes] == 0) return absl::OkStatus();
  const std::string skipped =
      "; the step's optimizer update wrote the parameters and its state back unchanged";
  if (word[kCodes] & kNllTarget) {
    const int64_t classes = word[kBound];
    // The cpu backend's text (LossKernels.cpp), then where it was found.
    return absl::InvalidArgumentError(absl::StrCat(
        "mstep::nll_loss: target ", word[kValue], " at position ", word[kPosition],
        " is out of range for C = ", classes, " classes (valid: 0 to ", classes - 1,
        ", or ignore_index ", word[kExtra],
        "). Check the labels and the number of classes. Found on the device by ",
        kernel_of(plan, word[kOp], "nll_loss"), skipped, "."));
  }
  if (word[kCodes] & kIndex) {
    // The ref backend's text (RefKernels.h's check_indices), without the
    // operands' types, which the word does not hold.
    const std::string kernel = kernel_of(plan, word[kOp], "index");
    std::string op = "index_select";
    for (const CudaKernelInfo& k : plan.kernels)
      if (absl::EndsWith(k.origin, absl::StrCat(" #", word[kOp])) &&
          absl::StartsWith(k.origin, "mstep."))
        op = k.origin.substr(6, k.origin.rfind(" #") - 6);
    return absl::InvalidArgumentError(absl::StrCat(
        "mstep::", op, ": index ", word[kValue], " (element ", word[kPosition],
        " of the index) is out of range [0, ", word[kBound], ") for dim ", word[kExtra],
        " of the input. Indices must be in [0, size); negative indices are not wrapped. "
        "Found on the device by ",
        kernel, skipped, "."));
  }
  return absl::InternalError(absl::StrCat("cuda: the step's error word holds unknown code ",
                                          word[kCodes], skipped, "."));
}

}  // namespace mstep::cuda::error_word
