// One process of DiskCache's multi-process test (disk_cache_test.cpp):
// loads and stores entries e0..e<names-1> of a shared cache directory in a
// random order, with payloads derived from the name, and fails on any hit
// whose payload is not exactly the expected bytes and on any corrupt entry
// (writers that rename whole files never leave one).
//
//   mstep_disk_cache_worker <dir> <max_mb> <seed> <names> <ops> [check]
//
// "check" only loads every name (no stores). Exit codes: 0 ok, 2 usage or
// open error, 3 wrong payload, 4 corrupt entry, 5 no hit at all (the run
// checked nothing).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "lib/runtime/DiskCache.h"

namespace {

std::string key_for(const std::string& name) { return "worker-key:" + name + ":v1"; }

/// 700..2699 bytes, every byte depending on the name and its position.
std::string payload_for(const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the name seeds the bytes
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  std::string out(700 + h % 2000, '\0');
  for (char& c : out) {
    h = h * 6364136223846793005ull + 1442695040888963407ull;
    c = static_cast<char>(h >> 56);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s <dir> <max_mb> <seed> <names> <ops> [check]\n", argv[0]);
    return 2;
  }
  mstep::DiskCache::Config config;
  config.dir = argv[1];
  config.max_mb = std::atof(argv[2]);
  uint64_t rng = std::strtoull(argv[3], nullptr, 10) * 2654435761u + 1;
  int names = std::atoi(argv[4]);
  int ops = std::atoi(argv[5]);
  bool check_only = argc > 6 && std::string(argv[6]) == "check";

  auto cache = mstep::DiskCache::open(config);
  if (!cache.ok()) {
    std::fprintf(stderr, "worker: %s\n", std::string(cache.status().message()).c_str());
    return 2;
  }
  int hits = 0;
  auto check = [&](const std::string& name) -> int {
    mstep::DiskCache::LoadResult r = (*cache)->load(name, key_for(name));
    hits += r.lookup == mstep::DiskCache::Lookup::hit;
    if (r.lookup == mstep::DiskCache::Lookup::corrupt) {
      std::fprintf(stderr, "worker: %s was corrupt\n", name.c_str());
      return 4;
    }
    if (r.lookup == mstep::DiskCache::Lookup::hit && r.payload != payload_for(name)) {
      std::fprintf(stderr, "worker: %s hit with a wrong payload\n", name.c_str());
      return 3;
    }
    if (r.lookup == mstep::DiskCache::Lookup::miss && !check_only)
      (*cache)->store(name, key_for(name), [name] { return payload_for(name); });
    return 0;
  };
  if (check_only) {
    for (int i = 0; i < names; ++i)
      if (int rc = check("e" + std::to_string(i))) return rc;
    return 0;
  }
  for (int op = 0; op < ops; ++op) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    if (int rc = check("e" + std::to_string((rng >> 33) % names))) return rc;
    // Loads are much faster than writes; let the writes keep up, as a
    // compile between two lookups would.
    if (op % 8 == 7) (*cache)->flush();
  }
  (*cache)->flush();
  std::printf("worker: %d hits in %d loads\n", hits, ops);
  return hits > 0 ? 0 : 5;
}
