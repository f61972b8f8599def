// CudaPlan <-> bytes (see CudaPlanFormat.h).
#include "lib/backends/cuda/CudaPlanFormat.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "lib/backends/cuda/CudaExecutable.h"
#include "mstep/core/ByteStream.h"
#include "mstep/core/Error.h"

namespace mstep::cuda {

namespace {

constexpr absl::string_view kMagic = "MSTEPCUD";
constexpr absl::string_view kWhat = "cuda executable";

void write_ints(ByteWriter& w, const std::vector<int>& values) {
  w.u32(static_cast<uint32_t>(values.size()));
  for (int v : values) w.i64(v);
}

/// An i64 that must fit an int (a value, kernel or matmul index, or -1).
int read_int(ByteReader& r, absl::string_view field) {
  const int64_t v = r.i64(field);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    r.fail(absl::StrCat(field, " ", v, " is out of range"));
    return 0;
  }
  return static_cast<int>(v);
}

std::vector<int> read_ints(ByteReader& r, absl::string_view field) {
  std::vector<int> values(r.count(field, 8));
  for (int& v : values) v = read_int(r, field);
  return values;
}

/// A u8 flag or enum no larger than `max`.
uint8_t read_small(ByteReader& r, absl::string_view field, uint8_t max) {
  const uint8_t v = r.u8(field);
  if (v > max) r.fail(absl::StrCat(field, " ", int{v}, " is out of range"));
  return v;
}

void write_report(ByteWriter& w, const PtxasKernelReport& report) {
  w.bytes(report.kernel);
  w.bytes(report.arch);
  for (long v :
       {long{report.registers}, long{report.barriers}, report.stack_bytes, report.spill_store_bytes,
        report.spill_load_bytes, report.shared_bytes, report.constant_bytes})
    w.i64(v);
}

PtxasKernelReport read_report(ByteReader& r) {
  PtxasKernelReport report;
  report.kernel = std::string(r.bytes("a ptxas report's kernel"));
  report.arch = std::string(r.bytes("a ptxas report's arch"));
  report.registers = read_int(r, "a ptxas report's registers");
  report.barriers = read_int(r, "a ptxas report's barriers");
  report.stack_bytes = r.i64("a ptxas report's stack");
  report.spill_store_bytes = r.i64("a ptxas report's spill stores");
  report.spill_load_bytes = r.i64("a ptxas report's spill loads");
  report.shared_bytes = r.i64("a ptxas report's smem");
  report.constant_bytes = r.i64("a ptxas report's cmem");
  return report;
}

void write_attention(ByteWriter& w, const CudaAttentionInfo& a) {
  const CudnnSdpaConfig& c = a.config;
  w.bytes(a.origin);
  w.u8(a.backward);
  for (int64_t v : {c.batch, c.heads, c.seq_q, c.seq_kv, c.head_dim, c.head_dim_v}) w.i64(v);
  w.u8(static_cast<uint8_t>(c.dtype));
  w.f64(c.scale);
  w.f64(c.dropout_p);
  w.u8(static_cast<uint8_t>(c.mask));
  w.u8(static_cast<uint8_t>(c.padding));
  for (bool flag : {c.causal, c.mask_per_batch, c.mask_per_head, c.mask_grad, c.return_probs,
                    c.return_dropout_mask, c.saved_probs, c.softmax_mode_none})
    w.u8(flag);
}

/// The layout's strides in their stored order.
template <typename Layout>
auto layout_strides(Layout& l) {
  return std::array{&l.q, &l.k, &l.v, &l.out, &l.grad_out, &l.grad_q, &l.grad_k, &l.grad_v};
}

/// The bytes write_attention writes at least (for the count's check).
constexpr size_t kAttentionBytes = 8 + 1 + 6 * 8 + 1 + 2 * 8 + 2 + 8;

CudaAttentionInfo read_attention(ByteReader& r) {
  CudaAttentionInfo a;
  CudnnSdpaConfig& c = a.config;
  a.origin = std::string(r.bytes("an attention step's origin"));
  a.backward = read_small(r, "an attention step's direction", 1);
  for (int64_t* v : {&c.batch, &c.heads, &c.seq_q, &c.seq_kv, &c.head_dim, &c.head_dim_v})
    *v = r.i64("an attention step's size");
  c.dtype = static_cast<DType>(read_small(r, "an attention step's dtype", kNumDTypes - 1));
  c.scale = r.f64("an attention step's scale");
  c.dropout_p = r.f64("an attention step's dropout_p");
  c.mask = static_cast<SdpaMaskKind>(read_small(r, "an attention step's mask kind",
                                                static_cast<uint8_t>(SdpaMaskKind::boolean)));
  c.padding = static_cast<SdpaPadding>(
      read_small(r, "an attention step's padding", static_cast<uint8_t>(SdpaPadding::left)));
  for (bool* flag : {&c.causal, &c.mask_per_batch, &c.mask_per_head, &c.mask_grad,
                     &c.return_probs, &c.return_dropout_mask, &c.saved_probs,
                     &c.softmax_mode_none})
    *flag = read_small(r, "an attention step's flag", 1);
  return a;
}

/// The version of a sealed blob (its header: magic, then a u32), or the
/// current one when the header is too short to say (unseal then names it).
uint32_t sealed_version(absl::string_view blob) {
  if (blob.size() < kMagic.size() + 4) return kCudaPlanFormatVersion;
  uint32_t version = 0;
  for (int i = 3; i >= 0; --i)
    version = version << 8 | static_cast<uint8_t>(blob[kMagic.size() + i]);
  return version;
}

/// The collective ops a plan may hold, by their stored code (the index).
constexpr OpKind kCollectiveOps[] = {OpKind::all_reduce, OpKind::all_gather, OpKind::broadcast,
                                     OpKind::reduce_scatter};

void write_collective(ByteWriter& w, const CudaCollectiveInfo& c) {
  w.bytes(c.origin);
  uint8_t code = 0;
  while (code < 3 && kCollectiveOps[code] != c.op) ++code;
  w.u8(code);
  for (int64_t v : {c.reduce_op, c.root, c.dim, c.world_size}) w.i64(v);
}

/// The bytes write_collective writes at least (for the count's check).
constexpr size_t kCollectiveBytes = 8 + 1 + 4 * 8;

CudaCollectiveInfo read_collective(ByteReader& r) {
  CudaCollectiveInfo c;
  c.origin = std::string(r.bytes("a collective step's origin"));
  c.op = kCollectiveOps[read_small(r, "a collective step's op", 3)];
  for (int64_t* v : {&c.reduce_op, &c.root, &c.dim, &c.world_size})
    *v = r.i64("a collective step's attribute");
  return c;
}

} // namespace

std::string serialize_cuda_plan(const CudaPlan& plan) {
  ByteWriter w;
  w.u32(static_cast<uint32_t>(plan.values.size()));
  for (const TensorType& type : plan.values) write_tensor_type(w, type);
  w.u64(plan.num_inputs);
  write_ints(w, plan.outputs);
  w.u32(static_cast<uint32_t>(plan.kernels.size()));
  for (const CudaKernelInfo& k : plan.kernels) {
    w.bytes(k.name);
    w.bytes(k.origin);
    for (unsigned v : k.grid) w.u32(v);
    for (unsigned v : k.block) w.u32(v);
    w.bytes(k.ptx);
    w.u32(static_cast<uint32_t>(k.cubins.size()));
    for (const CudaCubin& cubin : k.cubins) {
      w.bytes(cubin.arch);
      w.bytes(cubin.image);
    }
    w.u32(static_cast<uint32_t>(k.reports.size()));
    for (const PtxasKernelReport& report : k.reports) write_report(w, report);
  }
  w.u32(static_cast<uint32_t>(plan.matmuls.size()));
  for (const CudaMatmulInfo& m : plan.matmuls) {
    w.bytes(m.origin);
    w.i64(m.shape.m);
    w.i64(m.shape.n);
    w.i64(m.shape.k);
    w.u8(m.shape.transpose_a);
    w.u8(m.shape.transpose_b);
    w.u8(static_cast<uint8_t>(m.shape.dtype));
    w.u8(static_cast<uint8_t>(m.shape.epilogue));
    w.u8(m.shape.bias);
    w.i64(m.batch);
    w.i64(m.a_stride);
    w.i64(m.b_stride);
    w.i64(m.c_stride);
  }
  w.u32(static_cast<uint32_t>(plan.attentions.size()));
  for (const CudaAttentionInfo& a : plan.attentions) write_attention(w, a);
  w.u32(static_cast<uint32_t>(plan.launches.size()));
  for (const CudaLaunchStep& launch : plan.launches) {
    w.i64(launch.kernel);
    w.i64(launch.matmul);
    w.i64(launch.attention);
    write_ints(w, launch.args);
    write_ints(w, launch.writes);
  }
  w.u32(static_cast<uint32_t>(plan.arena_offsets.size()));
  for (int64_t offset : plan.arena_offsets) w.i64(offset);
  w.i64(plan.arena_bytes);
  // Version 3: each kernel's parameter slots and dynamic shared memory.
  for (const CudaKernelInfo& k : plan.kernels) {
    w.u32(static_cast<uint32_t>(k.slots.size()));
    for (const CudaKernelSlot& slot : k.slots) {
      w.i64(slot.arg);
      w.u8(slot.bytes);
      w.u8(slot.floating);
      w.u64(slot.bits);
    }
    w.u32(k.shared_bytes);
  }
  // Version 4: the error word.
  w.i64(plan.error_word);
  // Version 5: the aliases.
  w.u32(static_cast<uint32_t>(plan.aliases.size()));
  for (const CudaAlias& alias : plan.aliases) {
    w.i64(alias.value);
    w.i64(alias.root);
    w.i64(alias.byte_offset);
  }
  // Version 6: the collective steps (NCCL calls), and each launch's.
  w.u32(static_cast<uint32_t>(plan.collectives.size()));
  for (const CudaCollectiveInfo& c : plan.collectives) write_collective(w, c);
  for (const CudaLaunchStep& launch : plan.launches) w.i64(launch.collective);
  // Version 7: each matmul's bias gradient.
  for (const CudaMatmulInfo& m : plan.matmuls) w.u8(static_cast<uint8_t>(m.shape.bias_grad));
  // Version 8: each matmul's epilogue fallback launches.
  for (const CudaMatmulInfo& m : plan.matmuls) {
    w.u32(static_cast<uint32_t>(m.fallback.size()));
    for (const CudaLaunchStep& launch : m.fallback) {
      w.i64(launch.kernel);
      write_ints(w, launch.args);
      write_ints(w, launch.writes);
    }
  }
  // Version 9: each attention step's strides (SdpaLayout).
  for (const CudaAttentionInfo& a : plan.attentions)
    for (const SdpaStrides* strides : layout_strides(a.config.layout))
      for (int64_t stride : *strides) w.i64(stride);
  // Version 10: each matmul's f32 result flag.
  for (const CudaMatmulInfo& m : plan.matmuls) w.u8(m.shape.f32_result);
  return seal(kMagic, kCudaPlanFormatVersion, w.data());
}

absl::StatusOr<CudaPlan> deserialize_cuda_plan(absl::string_view blob) {
  // Version 1 is version 2 without the attention steps, 2 is 3 without the
  // kernels' parameter slots, 3 is 4 without the error word, 4 is 5 without
  // the aliases, 5 is 6 without the collective steps, 6 is 7 without the
  // matmuls' bias gradients, 7 is 8 without their epilogue fallbacks, 8 is
  // 9 without the attention steps' strides, 9 is 10 without the matmuls'
  // f32 result flags.
  const uint32_t stored = sealed_version(blob);
  const uint32_t version =
      stored >= kCudaPlanFormatOldestVersion && stored < kCudaPlanFormatVersion
          ? stored
          : kCudaPlanFormatVersion;
  MSTEP_ASSIGN_OR_RETURN(absl::string_view body, unseal(blob, kMagic, version, kWhat));
  ByteReader r(body, kWhat);
  CudaPlan plan;
  // Each count is checked against the bytes left (a corrupt count cannot
  // allocate more than the blob's size); reads after an error return zeros.
  plan.values.resize(r.count("the value count", 2));
  for (TensorType& type : plan.values) type = read_tensor_type(r, "a value's type");
  plan.num_inputs = r.u64("the input count");
  plan.outputs = read_ints(r, "an output");
  plan.kernels.resize(r.count("the kernel count", 8 * 4 + 6 * 4));
  for (CudaKernelInfo& k : plan.kernels) {
    k.name = std::string(r.bytes("a kernel's name"));
    k.origin = std::string(r.bytes("a kernel's origin"));
    for (unsigned& v : k.grid) v = r.u32("a kernel's grid");
    for (unsigned& v : k.block) v = r.u32("a kernel's block");
    k.ptx = std::string(r.bytes("a kernel's PTX"));
    k.cubins.resize(r.count("a kernel's cubin count", 16));
    for (CudaCubin& cubin : k.cubins) {
      cubin.arch = std::string(r.bytes("a cubin's arch"));
      cubin.image = std::string(r.bytes("a cubin"));
    }
    k.reports.resize(r.count("a kernel's ptxas report count", 16 + 7 * 8));
    for (PtxasKernelReport& report : k.reports) report = read_report(r);
  }
  plan.matmuls.resize(r.count("the matmul count", 8 + 3 * 8 + 5 + 4 * 8));
  for (CudaMatmulInfo& m : plan.matmuls) {
    m.origin = std::string(r.bytes("a matmul's origin"));
    m.shape.m = r.i64("a matmul's m");
    m.shape.n = r.i64("a matmul's n");
    m.shape.k = r.i64("a matmul's k");
    m.shape.transpose_a = read_small(r, "a matmul's transpose_a", 1);
    m.shape.transpose_b = read_small(r, "a matmul's transpose_b", 1);
    m.shape.dtype = static_cast<DType>(read_small(r, "a matmul's dtype", kNumDTypes - 1));
    m.shape.epilogue = static_cast<MatmulEpilogue>(
        read_small(r, "a matmul's epilogue", static_cast<uint8_t>(MatmulEpilogue::gelu)));
    m.shape.bias = read_small(r, "a matmul's bias flag", 1);
    m.batch = r.i64("a matmul's batch");
    m.a_stride = r.i64("a matmul's A stride");
    m.b_stride = r.i64("a matmul's B stride");
    m.c_stride = r.i64("a matmul's C stride");
  }
  if (version >= 2) {
    plan.attentions.resize(r.count("the attention step count", kAttentionBytes));
    for (CudaAttentionInfo& a : plan.attentions) a = read_attention(r);
  }
  plan.launches.resize(r.count("the launch count", (version >= 2 ? 3 : 2) * 8 + 2 * 4));
  for (CudaLaunchStep& launch : plan.launches) {
    launch.kernel = read_int(r, "a launch's kernel");
    launch.matmul = read_int(r, "a launch's matmul");
    if (version >= 2) launch.attention = read_int(r, "a launch's attention step");
    launch.args = read_ints(r, "a launch's argument");
    launch.writes = read_ints(r, "a launch's result");
  }
  plan.arena_offsets.resize(r.count("the arena offset count", 8));
  for (int64_t& offset : plan.arena_offsets) offset = r.i64("an arena offset");
  plan.arena_bytes = r.i64("the arena size");
  if (version >= 3) {
    for (CudaKernelInfo& k : plan.kernels) {
      k.slots.resize(r.count("a kernel's parameter count", 8 + 2 + 8));
      for (CudaKernelSlot& slot : k.slots) {
        slot.arg = read_int(r, "a kernel parameter's argument");
        slot.bytes = r.u8("a kernel parameter's size");
        slot.floating = read_small(r, "a kernel parameter's float flag", 1);
        slot.bits = r.u64("a kernel parameter's value");
      }
      k.shared_bytes = r.u32("a kernel's dynamic shared memory");
    }
  }
  if (version >= 4) plan.error_word = read_int(r, "the error word's value");
  if (version >= 5) {
    plan.aliases.resize(r.count("the alias count", 3 * 8));
    for (CudaAlias& alias : plan.aliases) {
      alias.value = read_int(r, "an alias's value");
      alias.root = read_int(r, "an alias's root");
      alias.byte_offset = r.i64("an alias's byte offset");
    }
  }
  if (version >= 6) {
    plan.collectives.resize(r.count("the collective step count", kCollectiveBytes));
    for (CudaCollectiveInfo& c : plan.collectives) c = read_collective(r);
    for (CudaLaunchStep& launch : plan.launches)
      launch.collective = read_int(r, "a launch's collective step");
  }
  if (version >= 7)
    for (CudaMatmulInfo& m : plan.matmuls)
      m.shape.bias_grad = static_cast<MatmulBiasGrad>(
          read_small(r, "a matmul's bias gradient", static_cast<uint8_t>(MatmulBiasGrad::rhs)));
  if (version >= 8)
    for (CudaMatmulInfo& m : plan.matmuls) {
      m.fallback.resize(r.count("a matmul's fallback launch count", 8 + 2 * 4));
      for (CudaLaunchStep& launch : m.fallback) {
        launch.kernel = read_int(r, "a fallback launch's kernel");
        launch.args = read_ints(r, "a fallback launch's argument");
        launch.writes = read_ints(r, "a fallback launch's result");
      }
    }
  if (version >= 9)
    for (CudaAttentionInfo& a : plan.attentions)
      for (SdpaStrides* strides : layout_strides(a.config.layout))
        for (int64_t& stride : *strides)
          stride = r.i64("an attention step's stride");
  if (version >= 10)
    for (CudaMatmulInfo& m : plan.matmuls)
      m.shape.f32_result = read_small(r, "a matmul's f32 result flag", 1);
  r.expect_end();
  MSTEP_RETURN_IF_ERROR(r.status());
  // Stored bytes that pass the checksum but not the plan's own checks are
  // corrupt too (or written by a broken compiler).
  if (absl::Status valid = validate_cuda_plan(plan); !valid.ok())
    return absl::DataLossError(absl::StrCat(kWhat, ": ", valid.message()));
  return plan;
}

} // namespace mstep::cuda
