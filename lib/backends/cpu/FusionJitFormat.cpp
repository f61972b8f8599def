// The serialized FusionJit: a one-line header (magic, version, payload size
// and checksum), then a line-based text index, then the raw shared object.
//
//   mstep-fusion-jit 2 <payload bytes> <hash_string hex>
//   target <arch> <cpu> <#features> <features...>
//   fusions <n>
//   fusion <compiled 0|1> <#operands> <#results> <#nests>
//   type <dtype> <rank> <dims...>        (one per operand, then per result)
//   nest <symbol> <outer> <elements> <grain>
//   skip <reason>                        (only when not compiled)
//   object <bytes>
//   <shared object bytes>
#include "lib/backends/cpu/FusionJitFormat.h"

#include <algorithm>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "mstep/core/Error.h"
#include "mstep/core/Hash.h"

namespace mstep::cpu {

namespace {

constexpr absl::string_view kMagic = "mstep-fusion-jit";
constexpr int kVersion = 2;
// Sanity bounds on counts read back, so a corrupt index fails cleanly
// instead of allocating without end.
constexpr int64_t kMaxCount = 1 << 20;
constexpr int64_t kMaxRank = 64;

uint64_t checksum(absl::string_view bytes) { return hash_string(bytes); }

void append_type(std::string& out, const TensorType& type) {
  absl::StrAppend(&out, "type ", static_cast<int>(type.dtype), " ", type.shape.rank());
  for (int64_t dim : type.shape) absl::StrAppend(&out, " ", dim);
  out += '\n';
}

/// Reads the index line by line; every read checks what it finds.
class IndexReader {
public:
  explicit IndexReader(absl::string_view payload) : rest_(payload) {}

  /// The next line split at spaces, which must start with `keyword`.
  absl::StatusOr<std::vector<absl::string_view>> line(absl::string_view keyword) {
    size_t end = rest_.find('\n');
    if (end == absl::string_view::npos)
      return corrupt(absl::StrCat("missing '", keyword, "' line"));
    absl::string_view text = rest_.substr(0, end);
    rest_.remove_prefix(end + 1);
    std::vector<absl::string_view> fields = absl::StrSplit(text, ' ', absl::SkipEmpty());
    if (fields.empty() || fields[0] != keyword)
      return corrupt(absl::StrCat("expected '", keyword, "', found '", text.substr(0, 40), "'"));
    return fields;
  }

  static absl::StatusOr<int64_t> integer(absl::string_view field, int64_t min, int64_t max) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(field, &value) || value < min || value > max)
      return corrupt(absl::StrCat("bad number '", field.substr(0, 24), "'"));
    return value;
  }

  absl::StatusOr<TensorType> type() {
    MSTEP_ASSIGN_OR_RETURN(auto fields, line("type"));
    if (fields.size() < 3) return corrupt("short 'type' line");
    TensorType type;
    MSTEP_ASSIGN_OR_RETURN(int64_t dtype, integer(fields[1], 0, kNumDTypes - 1));
    MSTEP_ASSIGN_OR_RETURN(int64_t rank, integer(fields[2], 0, kMaxRank));
    if (static_cast<int64_t>(fields.size()) != 3 + rank) return corrupt("'type' rank mismatch");
    type.dtype = static_cast<DType>(dtype);
    for (int64_t d = 0; d < rank; ++d) {
      MSTEP_ASSIGN_OR_RETURN(int64_t dim, integer(fields[3 + d], 0, INT64_MAX));
      type.shape.push_back(dim);
    }
    return type;
  }

  absl::string_view rest() const { return rest_; }

  static absl::Status corrupt(absl::string_view what) {
    return absl::DataLossError(
        absl::StrCat("FusionJit::load: the object is corrupt (", what,
                     "); delete the cache entry so the step is compiled again"));
  }

private:
  absl::string_view rest_;
};

} // namespace

std::string serialize_fusion_object(const FusionObject& object) {
  std::string payload;
  const FusionTarget& target = object.target;
  absl::StrAppend(&payload, "target ", target.arch, " ", target.cpu, " ", target.features.size());
  for (const std::string& feature : target.features) absl::StrAppend(&payload, " ", feature);
  payload += '\n';
  absl::StrAppend(&payload, "fusions ", object.fusions.size(), "\n");
  for (const FusionInfo& fusion : object.fusions) {
    absl::StrAppend(&payload, "fusion ", fusion.compiled ? 1 : 0, " ", fusion.operand_types.size(),
                    " ", fusion.result_types.size(), " ", fusion.nests.size(), "\n");
    for (const TensorType& type : fusion.operand_types) append_type(payload, type);
    for (const TensorType& type : fusion.result_types) append_type(payload, type);
    for (const FusionNestInfo& nest : fusion.nests)
      absl::StrAppend(&payload, "nest ", nest.symbol, " ", nest.outer, " ", nest.elements, " ",
                      nest.grain, "\n");
    if (!fusion.compiled)
      absl::StrAppend(&payload, "skip ", absl::StrReplaceAll(fusion.skip_reason, {{"\n", " "}}),
                      "\n");
  }
  absl::StrAppend(&payload, "object ", object.shared_object.size(), "\n");
  payload += object.shared_object;
  return absl::StrFormat("%s %d %d %016x\n", kMagic, kVersion, payload.size(), checksum(payload)) +
         payload;
}

absl::StatusOr<FusionObject> parse_fusion_object(absl::string_view bytes) {
  // 1. Header: magic and version, then the payload's size and checksum,
  //    checked before anything else is read.
  size_t header_end = bytes.find('\n');
  if (header_end == absl::string_view::npos || header_end > 128)
    return IndexReader::corrupt("no header");
  std::vector<absl::string_view> header = absl::StrSplit(bytes.substr(0, header_end), ' ');
  if (header.size() != 4 || header[0] != kMagic)
    return IndexReader::corrupt("not a FusionJit object");
  if (header[1] != absl::StrCat(kVersion))
    return absl::FailedPreconditionError(
        absl::StrCat("FusionJit::load: the object has format version ", header[1].substr(0, 8),
                     ", this build reads ", kVersion, "; the step is compiled again"));
  absl::string_view payload = bytes.substr(header_end + 1);
  uint64_t expected_sum = 0;
  MSTEP_ASSIGN_OR_RETURN(int64_t size, IndexReader::integer(header[2], 0, INT64_MAX));
  if (static_cast<size_t>(size) != payload.size() ||
      !absl::SimpleHexAtoi(header[3], &expected_sum) || checksum(payload) != expected_sum)
    return IndexReader::corrupt("size or checksum mismatch");

  // 2. The index.
  IndexReader reader(payload);
  FusionObject object;
  MSTEP_ASSIGN_OR_RETURN(auto target, reader.line("target"));
  if (target.size() < 4) return IndexReader::corrupt("short 'target' line");
  MSTEP_ASSIGN_OR_RETURN(int64_t features, IndexReader::integer(target[3], 0, kMaxCount));
  if (static_cast<int64_t>(target.size()) != 4 + features)
    return IndexReader::corrupt("'target' feature count mismatch");
  object.target.arch = std::string(target[1]);
  object.target.cpu = std::string(target[2]);
  for (size_t i = 4; i < target.size(); ++i) object.target.features.emplace_back(target[i]);
  MSTEP_ASSIGN_OR_RETURN(auto count_line, reader.line("fusions"));
  if (count_line.size() != 2) return IndexReader::corrupt("bad 'fusions' line");
  MSTEP_ASSIGN_OR_RETURN(int64_t count, IndexReader::integer(count_line[1], 0, kMaxCount));
  object.fusions.resize(count);
  for (FusionInfo& fusion : object.fusions) {
    MSTEP_ASSIGN_OR_RETURN(auto fields, reader.line("fusion"));
    if (fields.size() != 5) return IndexReader::corrupt("bad 'fusion' line");
    MSTEP_ASSIGN_OR_RETURN(int64_t compiled, IndexReader::integer(fields[1], 0, 1));
    MSTEP_ASSIGN_OR_RETURN(int64_t operands, IndexReader::integer(fields[2], 0, kMaxCount));
    MSTEP_ASSIGN_OR_RETURN(int64_t results, IndexReader::integer(fields[3], 0, kMaxCount));
    MSTEP_ASSIGN_OR_RETURN(int64_t nests, IndexReader::integer(fields[4], 0, kMaxCount));
    fusion.compiled = compiled == 1;
    for (int64_t i = 0; i < operands; ++i) {
      MSTEP_ASSIGN_OR_RETURN(TensorType type, reader.type());
      fusion.operand_types.push_back(std::move(type));
    }
    for (int64_t i = 0; i < results; ++i) {
      MSTEP_ASSIGN_OR_RETURN(TensorType type, reader.type());
      fusion.result_types.push_back(std::move(type));
    }
    for (int64_t i = 0; i < nests; ++i) {
      MSTEP_ASSIGN_OR_RETURN(auto nest_fields, reader.line("nest"));
      if (nest_fields.size() != 5) return IndexReader::corrupt("bad 'nest' line");
      FusionNestInfo nest;
      nest.symbol = std::string(nest_fields[1]);
      MSTEP_ASSIGN_OR_RETURN(nest.outer, IndexReader::integer(nest_fields[2], 0, INT64_MAX));
      MSTEP_ASSIGN_OR_RETURN(nest.elements, IndexReader::integer(nest_fields[3], 0, INT64_MAX));
      MSTEP_ASSIGN_OR_RETURN(nest.grain, IndexReader::integer(nest_fields[4], 1, INT64_MAX));
      fusion.nests.push_back(std::move(nest));
    }
    if (!fusion.compiled) {
      MSTEP_ASSIGN_OR_RETURN(auto skip, reader.line("skip"));
      std::vector<absl::string_view> words(skip.begin() + 1, skip.end());
      fusion.skip_reason = absl::StrJoin(words, " ");
    }
    if (fusion.compiled == fusion.nests.empty())
      return IndexReader::corrupt("a compiled fusion without nests, or the reverse");
  }
  MSTEP_ASSIGN_OR_RETURN(auto object_line, reader.line("object"));
  if (object_line.size() != 2) return IndexReader::corrupt("bad 'object' line");
  MSTEP_ASSIGN_OR_RETURN(int64_t object_size, IndexReader::integer(object_line[1], 0, INT64_MAX));
  if (static_cast<size_t>(object_size) != reader.rest().size())
    return IndexReader::corrupt("object size mismatch");
  object.shared_object = std::string(reader.rest());
  return object;
}

} // namespace mstep::cpu
