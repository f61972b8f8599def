// Host CPU features from cpuid, with the leaves, bits and OS-state
// conditions LLVM 19's getHostCPUFeatures uses for x86, so a feature name
// means here what it meant to the code generator.
#include "lib/backends/cpu/HostCpuFeatures.h"

#include <algorithm>
#include <cstdint>

#include "absl/container/flat_hash_map.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace mstep::cpu {

namespace {

using FeatureMap = absl::flat_hash_map<std::string, bool>;

#if defined(__x86_64__) || defined(__i386__)

struct Leaf {
  bool valid = false;
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

/// cpuid leaf/subleaf, invalid past the highest leaf the CPU reports.
Leaf cpuid(uint32_t leaf, uint32_t subleaf = 0) {
  Leaf r;
  r.valid = __get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx) != 0;
  if (!r.valid) r = Leaf{};
  return r;
}

bool bit(uint32_t reg, int n) { return ((reg >> n) & 1) != 0; }

/// XCR0: which register state the OS saves on a context switch.
uint64_t xcr0() {
  uint32_t low = 0, high = 0;
  __asm__ volatile("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
  return (uint64_t{high} << 32) | low;
}

/// 1. Leaf 1 (base features), OS state from xgetbv. 2. Extended leaves
/// 0x80000001 and 0x80000008. 3. Leaf 7 subleaves 0 and 1. 4. Leaves 0xd,
/// 0x14, 0x19 and 0x24. The same conditions as LLVM, feature by feature.
FeatureMap detect() {
  FeatureMap f;
  const Leaf l1 = cpuid(1);
  if (!l1.valid) return f;
  f["cx8"] = bit(l1.edx, 8);
  f["cmov"] = bit(l1.edx, 15);
  f["mmx"] = bit(l1.edx, 23);
  f["fxsr"] = bit(l1.edx, 24);
  f["sse"] = bit(l1.edx, 25);
  f["sse2"] = bit(l1.edx, 26);
  f["sse3"] = bit(l1.ecx, 0);
  f["pclmul"] = bit(l1.ecx, 1);
  f["ssse3"] = bit(l1.ecx, 9);
  f["cx16"] = bit(l1.ecx, 13);
  f["sse4.1"] = bit(l1.ecx, 19);
  f["sse4.2"] = bit(l1.ecx, 20);
  f["crc32"] = f["sse4.2"];
  f["movbe"] = bit(l1.ecx, 22);
  f["popcnt"] = bit(l1.ecx, 23);
  f["aes"] = bit(l1.ecx, 25);
  f["rdrnd"] = bit(l1.ecx, 30);

  const bool xsave = bit(l1.ecx, 27); // OSXSAVE: xgetbv is usable
  const uint64_t xcr = xsave ? xcr0() : 0;
  const bool avx_state = xsave && bit(l1.ecx, 28) && (xcr & 0x6) == 0x6;
  const bool avx512_state = avx_state && (xcr & 0xe0) == 0xe0;
  const uint64_t amx_bits = (uint64_t{1} << 17) | (uint64_t{1} << 18);
  const bool amx_state = xsave && (xcr & amx_bits) == amx_bits;
  f["avx"] = avx_state;
  f["fma"] = bit(l1.ecx, 12) && avx_state;
  f["xsave"] = bit(l1.ecx, 26) && avx_state;
  f["f16c"] = bit(l1.ecx, 29) && avx_state;

  const Leaf e1 = cpuid(0x80000001);
  f["sahf"] = bit(e1.ecx, 0);
  f["lzcnt"] = bit(e1.ecx, 5);
  f["sse4a"] = bit(e1.ecx, 6);
  f["prfchw"] = bit(e1.ecx, 8);
  f["xop"] = bit(e1.ecx, 11) && avx_state;
  f["lwp"] = bit(e1.ecx, 15);
  f["fma4"] = bit(e1.ecx, 16) && avx_state;
  f["tbm"] = bit(e1.ecx, 21);
  f["mwaitx"] = bit(e1.ecx, 29);
  f["64bit"] = bit(e1.edx, 29);
  const Leaf e8 = cpuid(0x80000008);
  f["clzero"] = bit(e8.ebx, 0);
  f["rdpru"] = bit(e8.ebx, 4);
  f["wbnoinvd"] = bit(e8.ebx, 9);

  const Leaf l7 = cpuid(7, 0);
  f["fsgsbase"] = bit(l7.ebx, 0);
  f["sgx"] = bit(l7.ebx, 2);
  f["bmi"] = bit(l7.ebx, 3);
  f["avx2"] = bit(l7.ebx, 5) && avx_state;
  f["bmi2"] = bit(l7.ebx, 8);
  f["invpcid"] = bit(l7.ebx, 10);
  f["rtm"] = bit(l7.ebx, 11);
  f["avx512f"] = bit(l7.ebx, 16) && avx512_state;
  f["evex512"] = f["avx512f"]; // LLVM 19: 512-bit vectors with AVX-512
  f["avx512dq"] = bit(l7.ebx, 17) && avx512_state;
  f["rdseed"] = bit(l7.ebx, 18);
  f["adx"] = bit(l7.ebx, 19);
  f["avx512ifma"] = bit(l7.ebx, 21) && avx512_state;
  f["clflushopt"] = bit(l7.ebx, 23);
  f["clwb"] = bit(l7.ebx, 24);
  f["avx512cd"] = bit(l7.ebx, 28) && avx512_state;
  f["sha"] = bit(l7.ebx, 29);
  f["avx512bw"] = bit(l7.ebx, 30) && avx512_state;
  f["avx512vl"] = bit(l7.ebx, 31) && avx512_state;
  f["avx512vbmi"] = bit(l7.ecx, 1) && avx512_state;
  f["pku"] = bit(l7.ecx, 4);
  f["waitpkg"] = bit(l7.ecx, 5);
  f["avx512vbmi2"] = bit(l7.ecx, 6) && avx512_state;
  f["shstk"] = bit(l7.ecx, 7);
  f["gfni"] = bit(l7.ecx, 8);
  f["vaes"] = bit(l7.ecx, 9) && avx_state;
  f["vpclmulqdq"] = bit(l7.ecx, 10) && avx_state;
  f["avx512vnni"] = bit(l7.ecx, 11) && avx512_state;
  f["avx512bitalg"] = bit(l7.ecx, 12) && avx512_state;
  f["avx512vpopcntdq"] = bit(l7.ecx, 14) && avx512_state;
  f["rdpid"] = bit(l7.ecx, 22);
  f["kl"] = bit(l7.ecx, 23);
  f["cldemote"] = bit(l7.ecx, 25);
  f["movdiri"] = bit(l7.ecx, 27);
  f["movdir64b"] = bit(l7.ecx, 28);
  f["enqcmd"] = bit(l7.ecx, 29);
  f["uintr"] = bit(l7.edx, 5);
  f["avx512vp2intersect"] = bit(l7.edx, 8) && avx512_state;
  f["serialize"] = bit(l7.edx, 14);
  f["tsxldtrk"] = bit(l7.edx, 16);
  f["pconfig"] = bit(l7.edx, 18);
  f["amx-bf16"] = bit(l7.edx, 22) && amx_state;
  f["avx512fp16"] = bit(l7.edx, 23) && avx512_state;
  f["amx-tile"] = bit(l7.edx, 24) && amx_state;
  f["amx-int8"] = bit(l7.edx, 25) && amx_state;

  // Subleaf 0's eax is the highest subleaf.
  const Leaf l71 = l7.valid && l7.eax >= 1 ? cpuid(7, 1) : Leaf{};
  f["sha512"] = bit(l71.eax, 0);
  f["sm3"] = bit(l71.eax, 1);
  f["sm4"] = bit(l71.eax, 2);
  f["raoint"] = bit(l71.eax, 3);
  f["avxvnni"] = bit(l71.eax, 4) && avx_state;
  f["avx512bf16"] = bit(l71.eax, 5) && avx512_state;
  f["cmpccxadd"] = bit(l71.eax, 7);
  f["amx-fp16"] = bit(l71.eax, 21) && amx_state;
  f["hreset"] = bit(l71.eax, 22);
  f["avxifma"] = bit(l71.eax, 23) && avx_state;
  f["avxvnniint8"] = bit(l71.edx, 4) && avx_state;
  f["avxneconvert"] = bit(l71.edx, 5) && avx_state;
  f["amx-complex"] = bit(l71.edx, 8) && amx_state;
  f["avxvnniint16"] = bit(l71.edx, 10) && avx_state;
  f["prefetchi"] = bit(l71.edx, 14);
  f["usermsr"] = bit(l71.edx, 15);
  const bool avx10 = bit(l71.edx, 19);
  const bool apx = bit(l71.edx, 21);
  for (const char* name : {"egpr", "push2pop2", "ppx", "ndd", "ccmp", "nf", "cf", "zu"})
    f[name] = apx;

  const Leaf ld = cpuid(0xd, 1);
  f["xsaveopt"] = bit(ld.eax, 0) && avx_state;
  f["xsavec"] = bit(ld.eax, 1) && avx_state;
  f["xsaves"] = bit(ld.eax, 3) && avx_state;
  f["ptwrite"] = bit(cpuid(0x14, 0).ebx, 4);
  f["widekl"] = l7.valid && bit(cpuid(0x19).ebx, 2);
  const Leaf l24 = cpuid(0x24);
  f["avx10.1-256"] = avx10 && (l24.ebx & 0xff) >= 1;
  f["avx10.1-512"] = f["avx10.1-256"] && bit(l24.ebx, 18);
  return f;
}

#else

/// No detection off x86: every feature is unknown, so code generated for
/// a named feature never loads.
FeatureMap detect() { return {}; }

#endif

const FeatureMap& host_features() {
  static const FeatureMap* features = new FeatureMap(detect());
  return *features;
}

} // namespace

absl::string_view host_architecture() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#elif defined(__i386__)
  return "i386";
#else
  return "unknown";
#endif
}

bool knows_cpu_feature(absl::string_view feature) { return host_features().contains(feature); }

std::vector<std::string> known_cpu_features() {
  std::vector<std::string> names;
  for (const auto& [name, present] : host_features()) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

bool host_has_cpu_feature(absl::string_view feature) {
  auto it = host_features().find(feature);
  return it != host_features().end() && it->second;
}

} // namespace mstep::cpu
