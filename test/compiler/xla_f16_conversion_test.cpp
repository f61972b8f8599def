// The xla loops' f16 loads and stores (lib/backends/xla/XlaElementTypes.h):
// the F16C form (LLVM's fpext/fptrunc of half, taken where the step's
// target has F16C) and the integer form (taken where it has not) must give
// the bits of mstep::Float16 (the ref kernels' conversion, the compiler's
// _Float16): round to nearest even, overflow to inf from 65520, the f16
// subnormals, a NaN quiet with its sign and top payload bits. Both forms are
// generated here as vector loops in one object for this host (the F16C
// one only where the CPU has F16C) and run on f32 inputs chosen to hit
// every rounding case (ties, the values next to them, each subnormal
// exponent, the overflow edge, NaN payloads, a hashed sample of the rest)
// and on every f16 value.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lib/backends/cpu/FusionJitLowering.h"
#include "lib/backends/cpu/HostCpuFeatures.h"
#include "lib/backends/cpu/SharedLibrary.h"
#include "lib/backends/cpu/SharedObjectLink.h"
#include "lib/backends/xla/XlaElementTypes.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mstep/core/HalfTypes.h"

namespace mstep::xla {
namespace {

constexpr unsigned kLanes = 8;

/// void name(const T* in, U* out, i64 n), n a multiple of kLanes: `convert`
/// applied to <kLanes x in_element> vectors.
void add_vector_loop(llvm::Module& module, const std::string& name, llvm::Type* in_element,
                     llvm::Type* out_element,
                     const std::function<llvm::Value*(llvm::IRBuilder<>&, llvm::Value*)>& convert) {
  llvm::LLVMContext& c = module.getContext();
  llvm::IRBuilder<> b(c);
  auto* ptr = b.getPtrTy();
  auto* type = llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, b.getInt64Ty()}, false);
  auto* f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, module);
  auto* entry = llvm::BasicBlock::Create(c, "entry", f);
  auto* body = llvm::BasicBlock::Create(c, "body", f);
  auto* done = llvm::BasicBlock::Create(c, "done", f);
  b.SetInsertPoint(entry);
  b.CreateCondBr(b.CreateICmpSGT(f->getArg(2), b.getInt64(0)), body, done);
  b.SetInsertPoint(body);
  llvm::PHINode* i = b.CreatePHI(b.getInt64Ty(), 2);
  i->addIncoming(b.getInt64(0), entry);
  auto* in_vector = llvm::FixedVectorType::get(in_element, kLanes);
  // Element-aligned (the vectors' own alignment is not the buffers').
  llvm::Value* v = b.CreateAlignedLoad(in_vector, b.CreateInBoundsGEP(in_element, f->getArg(0), i),
                                       llvm::Align(in_element->getPrimitiveSizeInBits() / 8));
  b.CreateAlignedStore(convert(b, v), b.CreateInBoundsGEP(out_element, f->getArg(1), i),
                       llvm::Align(out_element->getPrimitiveSizeInBits() / 8));
  llvm::Value* next = b.CreateAdd(i, b.getInt64(kLanes));
  i->addIncoming(next, body);
  b.CreateCondBr(b.CreateICmpSLT(next, f->getArg(2)), body, done);
  b.SetInsertPoint(done);
  b.CreateRetVoid();
}

using Narrow = void (*)(const float*, uint16_t*, int64_t);
using Widen = void (*)(const uint16_t*, float*, int64_t);

/// The conversions, generated for this host: the integer forms always,
/// the F16C forms where the CPU has F16C.
struct Conversions {
  std::unique_ptr<cpu::SharedLibrary> library;
  Narrow narrow_emulated = nullptr, narrow_f16c = nullptr;
  Widen widen_emulated = nullptr, widen_f16c = nullptr;
};

Conversions build_conversions() {
  mlir::DialectRegistry registry;
  cpu::declare_kernel_dialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  mlir::OwningOpRef<mlir::ModuleOp> kernels =
      mlir::ModuleOp::create(mlir::UnknownLoc::get(&context));
  const cpu::FusionTarget target = cpu::host_target();
  const bool f16c = cpu::host_has_cpu_feature("f16c");
  auto extend = [&](llvm::Module& module) -> absl::Status {
    llvm::LLVMContext& c = module.getContext();
    auto* f32 = llvm::Type::getFloatTy(c);
    auto* i16 = llvm::Type::getInt16Ty(c);
    for (bool hardware : {false, true}) {
      if (hardware && !f16c) continue;
      const std::string suffix = hardware ? "f16c" : "emulated";
      add_vector_loop(module, "narrow_" + suffix, f32, i16,
                      [&](llvm::IRBuilder<>& b, llvm::Value* v) {
                        return round_to_f16(b, v, hardware);
                      });
      add_vector_loop(module, "widen_" + suffix, i16, f32,
                      [&](llvm::IRBuilder<>& b, llvm::Value* v) {
                        return widen_f16(b, v, hardware);
                      });
    }
    return absl::OkStatus();
  };
  Conversions out;
  absl::StatusOr<std::string> object = cpu::generate_object(*kernels, {}, target, extend);
  EXPECT_TRUE(object.ok()) << object.status();
  if (!object.ok()) return out;
  absl::StatusOr<std::string> linked = cpu::link_shared_object(*object);
  EXPECT_TRUE(linked.ok()) << linked.status();
  if (!linked.ok()) return out;
  auto library = cpu::SharedLibrary::load(*linked, "the f16 conversion test's code");
  EXPECT_TRUE(library.ok()) << library.status();
  if (!library.ok()) return out;
  out.library = std::move(*library);
  auto lookup = [&](const std::string& name) -> void* {
    absl::StatusOr<void*> symbol = out.library->symbol(name);
    EXPECT_TRUE(symbol.ok()) << symbol.status();
    return symbol.ok() ? *symbol : nullptr;
  };
  out.narrow_emulated = reinterpret_cast<Narrow>(lookup("narrow_emulated"));
  out.widen_emulated = reinterpret_cast<Widen>(lookup("widen_emulated"));
  if (f16c) {
    out.narrow_f16c = reinterpret_cast<Narrow>(lookup("narrow_f16c"));
    out.widen_f16c = reinterpret_cast<Widen>(lookup("widen_f16c"));
  }
  return out;
}

const Conversions& conversions() {
  static const Conversions* c = new Conversions(build_conversions());
  return *c;
}

uint16_t float16_bits(float f) {
  const Float16 h(f);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof bits);
  return bits;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

/// f32 bit patterns that reach every rounding case of f32 -> f16.
std::vector<uint32_t> rounding_cases() {
  std::vector<uint32_t> out;
  // Every sign, exponent and top 10 mantissa bits (each f16 normal's
  // neighbourhood) with the low 13 bits at: 0, just above 0, a tie, either
  // side of it, the top, and a hashed value.
  for (uint32_t high = 0; high < (1u << 19); ++high)
    for (uint32_t low : {0u, 1u, 0xFFFu, 0x1000u, 0x1001u, 0x1FFFu,
                         (high * 2654435761u) & 0x1FFFu})
      out.push_back(high << 13 | low);
  // The f16 subnormals: f32 exponents 102..112 round at mantissa bit
  // 126 - e; ties there and their neighbours, for every kept pattern up to
  // 2^10 of them per exponent.
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t e = 100; e <= 113; ++e) {
      const int p = 126 - static_cast<int>(e); // bits below the f16 grid
      for (uint32_t k = 0; k < 1024; ++k) {
        const uint32_t kept = p >= 23 ? 0 : (k << p) & 0x7FFFFFu;
        const uint32_t half = p >= 1 && p <= 23 ? 1u << (p - 1) : 0;
        for (uint32_t m : {kept, kept | half, (kept | half) + 1, (kept | half) - 1})
          out.push_back(sign | e << 23 | (m & 0x7FFFFFu));
      }
    }
  // The overflow edge (65504 is the largest f16, 65520 the first to round
  // to inf), inf, and NaNs with payloads (quiet and signalling).
  for (uint32_t u = 0x477FE000u; u <= 0x47800100u; ++u) out.push_back(u), out.push_back(u | 1u << 31);
  for (uint32_t u : {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0x7FA00000u,
                     0x7FBFFFFFu, 0xFFFFFFFFu, 0x7FC02000u, 0x7F802000u})
    out.push_back(u);
  // A hashed sample of everything else.
  for (uint32_t i = 0; i < (1u << 22); ++i) out.push_back(i * 2654435761u + 0x9E3779B9u);
  while (out.size() % kLanes) out.push_back(0);
  return out;
}

TEST(XlaF16Conversion, RoundingToF16GivesFloat16sBitsInBothForms) {
  const Conversions& c = conversions();
  ASSERT_NE(c.narrow_emulated, nullptr);
  const std::vector<uint32_t> cases = rounding_cases();
  std::vector<float> in(cases.size());
  std::memcpy(in.data(), cases.data(), cases.size() * 4);
  std::vector<uint16_t> emulated(in.size()), f16c(in.size());
  c.narrow_emulated(in.data(), emulated.data(), static_cast<int64_t>(in.size()));
  if (c.narrow_f16c) c.narrow_f16c(in.data(), f16c.data(), static_cast<int64_t>(in.size()));
  size_t bad = 0;
  for (size_t i = 0; i < in.size() && bad < 10; ++i) {
    const uint16_t want = float16_bits(in[i]);
    if (emulated[i] != want)
      ++bad, ADD_FAILURE() << "emulated: f32 0x" << std::hex << cases[i] << " -> 0x" << emulated[i]
                           << ", Float16 0x" << want;
    if (c.narrow_f16c && f16c[i] != want)
      ++bad, ADD_FAILURE() << "F16C: f32 0x" << std::hex << cases[i] << " -> 0x" << f16c[i]
                           << ", Float16 0x" << want;
  }
  if (!c.narrow_f16c) GTEST_SKIP() << "this CPU has no F16C: only the integer form was checked";
}

TEST(XlaF16Conversion, WideningEveryF16ValueGivesFloat16sBitsInBothForms) {
  const Conversions& c = conversions();
  ASSERT_NE(c.widen_emulated, nullptr);
  std::vector<uint16_t> in(1u << 16);
  for (uint32_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint16_t>(i);
  std::vector<float> emulated(in.size()), f16c(in.size());
  c.widen_emulated(in.data(), emulated.data(), static_cast<int64_t>(in.size()));
  if (c.widen_f16c) c.widen_f16c(in.data(), f16c.data(), static_cast<int64_t>(in.size()));
  size_t bad = 0;
  for (size_t i = 0; i < in.size() && bad < 10; ++i) {
    Float16 h;
    std::memcpy(&h, &in[i], 2);
    const uint32_t want = bits_of(static_cast<float>(h));
    if (bits_of(emulated[i]) != want)
      ++bad, ADD_FAILURE() << "emulated: f16 0x" << std::hex << in[i] << " -> 0x"
                           << bits_of(emulated[i]) << ", Float16 0x" << want;
    if (c.widen_f16c && bits_of(f16c[i]) != want)
      ++bad, ADD_FAILURE() << "F16C: f16 0x" << std::hex << in[i] << " -> 0x" << bits_of(f16c[i])
                           << ", Float16 0x" << want;
  }
  if (!c.widen_f16c) GTEST_SKIP() << "this CPU has no F16C: only the integer form was checked";
}

} // namespace
} // namespace mstep::xla
