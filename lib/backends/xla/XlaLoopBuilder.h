// The xla step function's own loops (XlaOpLoops.h) in LLVM IR: one
// function per op node, `i32 (ptr operands, ptr results)` over the same
// pointer arrays a callout takes, built with counted loops over element
// offsets. Library-internal (the compile half); no MLIR headers.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"

namespace mstep::xla {

/// Builds one op's function. Pointers to the node's operands and results
/// are loaded in the entry block, so they dominate every loop.
class LoopBuilder {
public:
  using Body = std::function<void(llvm::Value* index)>;

  LoopBuilder(llvm::Module& module, const std::string& name, size_t operands, size_t results);
  /// A row function: `void (ptr operands, ptr results, i64 begin, i64
  /// end)` (a cpu::FusionEntry), which computes rows [begin, end) of its
  /// op, so that the step function can split the rows over the threads
  /// (OpLoop::rows). It cannot fail (no fail_if).
  struct Rows {};
  LoopBuilder(llvm::Module& module, const std::string& name, size_t operands, size_t results,
              Rows);

  /// A row function's first and end row.
  llvm::Value* row_begin() const { return function_->getArg(2); }
  llvm::Value* row_end() const { return function_->getArg(3); }

  llvm::IRBuilder<>& b() { return b_; }
  llvm::Module& module() { return module_; }
  llvm::Value* operand(size_t i) const { return operands_[i]; }
  llvm::Value* result(size_t r) const { return results_[r]; }

  llvm::Type* f32() { return b_.getFloatTy(); }
  llvm::Type* f64() { return b_.getDoubleTy(); }
  llvm::Type* i64() { return b_.getInt64Ty(); }
  llvm::Value* i64(int64_t v) { return b_.getInt64(static_cast<uint64_t>(v)); }
  llvm::Value* f64(double v) { return llvm::ConstantFP::get(b_.getDoubleTy(), v); }
  llvm::Value* f32(float v) { return llvm::ConstantFP::get(b_.getFloatTy(), v); }

  /// for (i = begin; i < end; ++i) body(i). With `parallel`, the
  /// iterations are independent (each reads and writes only its own
  /// elements through load/store below): the loop is marked for LLVM's
  /// vectorizer, without runtime alias checks (results may be their
  /// operands' memory, element for element). A nonzero `vector_width`
  /// asks the vectorizer for that many lanes (a short row whose trip count
  /// LLVM bounds, which it would otherwise give 4).
  void loop(llvm::Value* begin, llvm::Value* end, const Body& body, bool parallel = false,
            unsigned vector_width = 0);
  void loop(int64_t count, const Body& body, bool parallel = false) {
    loop(i64(0), i64(count), body, parallel);
  }

  /// element `index` of `type` at `base`.
  llvm::Value* load(llvm::Type* type, llvm::Value* base, llvm::Value* index);
  void store(llvm::Value* value, llvm::Value* base, llvm::Value* index);

  /// A mutable local (promoted to a register by LLVM), set to `init` here.
  llvm::AllocaInst* local(llvm::Type* type, llvm::Value* init);
  llvm::Value* get(llvm::AllocaInst* local);
  void set(llvm::AllocaInst* local, llvm::Value* value);

  /// A local array holding `values` (of `element` type), set here.
  llvm::Value* array(llvm::Type* element, llvm::ArrayRef<llvm::Value*> values);

  /// Returns 1 from the function when `condition` holds.
  void fail_if(llvm::Value* condition);

  /// Returns 0 (nothing from a row function) and gives the finished
  /// function (internal linkage).
  llvm::Function* finish();

  // Arithmetic helpers.
  llvm::Value* is_nan(llvm::Value* v) { return b_.CreateFCmpUNO(v, v); }
  llvm::Value* to_f64(llvm::Value* v) { return b_.CreateFPExt(v, f64()); }
  llvm::Value* to_f32(llvm::Value* v) { return b_.CreateFPTrunc(v, f32()); }
  llvm::Value* call(llvm::Intrinsic::ID id, llvm::Value* v) {
    return b_.CreateUnaryIntrinsic(id, v);
  }

  /// e^x of f64 `x` or a vector of them, inline (no libm call, so it
  /// vectorizes): the cpu backend's simd::exp (HostSimd.h) step for step,
  /// within a few ulp of exp. NaN stays NaN, -inf gives 0, +inf inf.
  llvm::Value* exp(llvm::Value* x);
  /// `v` splat to `like`'s vector width, or `v` when `like` is a scalar.
  llvm::Value* splat_like(llvm::Value* like, llvm::Value* v);

private:
  void begin(const std::string& name, llvm::FunctionType* type, size_t operands, size_t results);

  llvm::Module& module_;
  llvm::LLVMContext& context_;
  llvm::IRBuilder<> b_;
  llvm::Function* function_ = nullptr;
  llvm::BasicBlock* entry_ = nullptr;
  std::vector<llvm::Value*> operands_, results_;
  /// The access group of the innermost parallel loop being built, or null.
  llvm::MDNode* access_group_ = nullptr;
  bool rows_ = false;
};

} // namespace mstep::xla
