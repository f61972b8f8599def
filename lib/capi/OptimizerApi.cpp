// C API: optimizers over parameter tensors (SGD, Adam, AdamW, Adadelta).
#include <memory>

#include "absl/strings/str_cat.h"
#include "lib/capi/Handles.h"
#include "lib/capi/OpTable.h"
#include "mstep/api/optim/Adadelta.h"
#include "mstep/api/optim/Adam.h"
#include "mstep/api/optim/SGD.h"

using namespace mstep;
using namespace mstep::capi;

struct mstep_optimizer : HandleBase {
  mstep_optimizer(mstep_context* c, std::unique_ptr<optim::Optimizer> o)
      : HandleBase(HandleKind::optimizer), context(c), optimizer(std::move(o)) {}
  void drop_payload() override { optimizer.reset(); }
  mstep_context* context;
  std::unique_ptr<optim::Optimizer> optimizer;
};

namespace {

constexpr const char* kSgd = "sgd(params; lr: float = 0.001, momentum: float = 0, dampening: "
                             "float = 0, weight_decay: float = 0, nesterov: bool = false)";
constexpr const char* kAdam = "adam(params; lr: float = 0.001, beta1: float = 0.9, beta2: float = "
                              "0.999, eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool "
                              "= false)";
constexpr const char* kAdamW = "adamw(params; lr: float = 0.001, beta1: float = 0.9, beta2: float "
                               "= 0.999, eps: float = 1e-8, weight_decay: float = 0.01, amsgrad: "
                               "bool = false)";
constexpr const char* kAdadelta = "adadelta(params; lr: float = 1, rho: float = 0.9, eps: float = "
                                  "1e-6, weight_decay: float = 0)";

std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& kind,
                                                 std::vector<Tensor> params, OpAttrs& a) {
  if (kind == "sgd") {
    optim::SGDOptions o;
    o = {a.get_float("lr", o.lr), a.get_float("momentum", o.momentum),
         a.get_float("dampening", o.dampening), a.get_float("weight_decay", o.weight_decay),
         a.get_bool("nesterov", o.nesterov)};
    a.finish(kSgd);
    return std::make_unique<optim::SGD>(std::move(params), o);
  }
  if (kind == "adam" || kind == "adamw") {
    const bool decoupled = kind == "adamw";
    const double default_wd = decoupled ? optim::AdamWOptions{}.weight_decay : 0.0;
    const double lr = a.get_float("lr", 1e-3), beta1 = a.get_float("beta1", 0.9),
                 beta2 = a.get_float("beta2", 0.999), eps = a.get_float("eps", 1e-8),
                 wd = a.get_float("weight_decay", default_wd);
    const bool amsgrad = a.get_bool("amsgrad", false);
    a.finish(decoupled ? kAdamW : kAdam);
    if (decoupled)
      return std::make_unique<optim::AdamW>(
          std::move(params), optim::AdamWOptions{lr, {beta1, beta2}, eps, wd, amsgrad});
    return std::make_unique<optim::Adam>(std::move(params),
                                         optim::AdamOptions{lr, {beta1, beta2}, eps, wd, amsgrad});
  }
  if (kind == "adadelta") {
    optim::AdadeltaOptions o;
    o = {a.get_float("lr", o.lr), a.get_float("rho", o.rho), a.get_float("eps", o.eps),
         a.get_float("weight_decay", o.weight_decay)};
    a.finish(kAdadelta);
    return std::make_unique<optim::Adadelta>(std::move(params), o);
  }
  fail(MSTEP_NOT_FOUND,
       absl::StrCat("no optimizer '", kind, "'; use one of:\n  ", kSgd, "\n  ", kAdam, "\n  ",
                    kAdamW, "\n  ", kAdadelta));
}

void check_optimizer(const mstep_optimizer* o) {
  check_handle(o, HandleKind::optimizer, "optimizer");
}

}  // namespace

extern "C" {

mstep_status* mstep_optimizer_create(mstep_context* context, const char* kind,
                                     mstep_tensor* const* params, size_t num_params,
                                     const mstep_attr* attrs, size_t num_attrs,
                                     mstep_optimizer** out_optimizer) {
  return guard(__func__, [&] {
    check_handle(context, HandleKind::context, "context");
    require_out(kind, "kind");
    require_out(out_optimizer, "out_optimizer");
    std::vector<Tensor> tensors = tensors_of(params, num_params, "params", false);
    for (size_t i = 0; i < num_params; ++i)
      if (params[i]->builder)
        fail(MSTEP_INVALID_ARGUMENT,
             absl::StrCat("params[", i, "] belongs to a graph builder and holds no data"));
    if (num_attrs > 0 && attrs == nullptr)
      fail(MSTEP_INVALID_ARGUMENT, absl::StrCat("attrs is NULL but num_attrs is ", num_attrs));
    OpAttrs op_attrs(kind, attrs, num_attrs);
    auto* handle =
        new mstep_optimizer(context, make_optimizer(kind, std::move(tensors), op_attrs));
    ++context->live_handles;
    *out_optimizer = handle;
  });
}

mstep_status* mstep_optimizer_step(mstep_optimizer* optimizer) {
  return guard(__func__, [&] {
    check_optimizer(optimizer);
    optimizer->optimizer->step();
  });
}

mstep_status* mstep_optimizer_zero_grad(mstep_optimizer* optimizer) {
  return guard(__func__, [&] {
    check_optimizer(optimizer);
    optimizer->optimizer->zero_grad();
  });
}

mstep_status* mstep_optimizer_set_lr(mstep_optimizer* optimizer, double lr) {
  return guard(__func__, [&] {
    check_optimizer(optimizer);
    optimizer->optimizer->set_lr(lr);
  });
}

mstep_status* mstep_optimizer_release(mstep_optimizer* optimizer) {
  if (optimizer == nullptr) return nullptr;
  return guard(__func__, [&] {
    release_owned(optimizer, HandleKind::optimizer, "optimizer");
  });
}

}  // extern "C"
