// check_same_graph (Communicator.h): at a step graph's first run every rank
// all-gathers a hash of its graph under the arrival notes; only when they
// differ a second gather brings the texts, from which every rank writes the
// same message naming the rank that differs and how.
#include <algorithm>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "lib/runtime/distributed/Communicator.h"
#include "lib/runtime/distributed/ProcessGroup.h"
#include "mstep/core/Hash.h"

namespace mstep::dist {

namespace {

struct Identity {
  uint64_t structure, types, collectives, inputs;
  uint64_t text_bytes;
};

std::string first_line_difference(const std::string& mine, const std::string& theirs,
                                   absl::string_view what, int other_rank) {
  std::vector<std::string> a = absl::StrSplit(mine, '\n', absl::SkipEmpty());
  std::vector<std::string> b = absl::StrSplit(theirs, '\n', absl::SkipEmpty());
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (a[i] != b[i])
      return absl::StrCat("its ", what, " #", i, " is ", b[i], " where rank 0's is ", a[i]);
  return absl::StrCat("it has ", b.size(), " ", what, "s where rank 0 has ", a.size(),
                      b.size() > a.size() ? absl::StrCat(" (its extra one: ", b[a.size()], ")")
                                          : absl::StrCat(" (rank 0's extra one: ", a[b.size()], ")"));
}

}  // namespace

absl::Status check_same_graph(const GraphIdentity& mine) {
  State& s = state();
  const int world = s.world;
  if (world == 1) return absl::OkStatus();
  if (!s.failure.empty())
    return absl::FailedPreconditionError(absl::StrCat(
        "an earlier collective failed (", s.failure, "); the process group is unusable"));
#if !MSTEP_HAVE_MPI
  return absl::OkStatus();
#else
  // 1. Every rank's hashes; 2. only when they differ, every rank's text,
  //    from which each rank writes the same message.
  std::string text = mine.collectives + '\0' + mine.inputs;
  Identity me{mine.structure, mine.types, hash_string(mine.collectives), hash_string(mine.inputs),
              text.size()};
  std::vector<Identity> all(world);
  // The first exchange carries arrival notes, so a rank that never comes
  // is named; the second follows only when every rank came to the first.
  const std::string first = mine.collectives.substr(0, mine.collectives.find('\n'));
  const std::string what = absl::StrCat("the step-graph check before ", first);
  ArrivalNotes notes;
  auto gather = [&](auto issue, absl::string_view call, ArrivalNotes* arrivals) -> absl::Status {
    MPI_Request req = MPI_REQUEST_NULL;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (arrivals) arrivals->post(s, what);
      int rc = issue(&req);
      if (rc != MPI_SUCCESS) return mpi_check(rc, call, "mstep: comparing the step graphs");
    }
    bool ok = poll_until(deadline_from_now(), [&] {
      std::lock_guard<std::mutex> lock(s.mu);
      int flag = 0;
      MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
      return (!arrivals || arrivals->test()) && flag != 0;
    });
    if (ok) return absl::OkStatus();
    s.failure = absl::StrCat(
        "comparing the step graphs across ranks at their first run, before ", first, " (rank ",
        s.rank, "): ",
        arrivals ? arrivals->who_is_missing(s) : std::string("a rank did not answer"), " within ",
        seconds_text(s.timeout),
        " (MSTEP_DIST_TIMEOUT). A rank that died, hangs or runs another step stalls the others");
    return absl::DeadlineExceededError(s.failure);
  };
  absl::Status st = gather(
      [&](MPI_Request* r) {
        return MPI_Iallgather(&me, sizeof(Identity), MPI_BYTE, all.data(), sizeof(Identity),
                              MPI_BYTE, s.check, r);
      },
      "MPI_Iallgather", &notes);
  if (!st.ok()) return st;
  int differs = -1;
  for (int p = 0; p < world && differs < 0; ++p)
    if (std::memcmp(&all[p], &all[0], sizeof(Identity)) != 0) differs = p;
  if (differs < 0) return absl::OkStatus();

  std::vector<int> sizes(world), offsets(world);
  int total = 0;
  for (int p = 0; p < world; ++p) {
    sizes[p] = static_cast<int>(all[p].text_bytes);
    offsets[p] = total;
    total += sizes[p];
  }
  std::string texts(total, '\0');
  st = gather(
      [&](MPI_Request* r) {
        return MPI_Iallgatherv(text.data(), static_cast<int>(text.size()), MPI_BYTE, texts.data(),
                               sizes.data(), offsets.data(), MPI_BYTE, s.check, r);
      },
      "MPI_Iallgatherv", nullptr);
  if (!st.ok()) return st;
  auto part = [&](int p, int which) {
    std::string t = texts.substr(offsets[p], sizes[p]);
    const size_t cut = t.find('\0');
    return which == 0 ? t.substr(0, cut) : t.substr(cut == std::string::npos ? t.size() : cut + 1);
  };
  const Identity& a = all[0];
  const Identity& b = all[differs];
  std::string how;
  if (a.collectives != b.collectives) {
    how = first_line_difference(part(0, 0), part(differs, 0), "collective", differs);
  } else if (a.inputs != b.inputs) {
    std::vector<std::string> x = absl::StrSplit(part(0, 1), ", ");
    std::vector<std::string> y = absl::StrSplit(part(differs, 1), ", ");
    how = absl::StrCat("it has ", y.size(), " inputs where rank 0 has ", x.size());
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i)
      if (x[i] != y[i]) {
        how = absl::StrCat("shapes ", y[i], " vs ", x[i], " (its input ", i, " against rank 0's)");
        break;
      }
  } else if (a.types != b.types) {
    how = "the same inputs and collectives, but the types of its intermediate values differ";
  } else {
    how = absl::StrCat("another structure (structural hash ", absl::Hex(b.structure), " vs ",
                       absl::Hex(a.structure), "): an op that runs on one rank only?");
  }
  s.failure = absl::StrCat(
      "rank ", differs, " has another graph than rank 0 at the first run of this step: ", how,
      ". Every rank must run the same step on the same shapes (give each rank an equal share of "
      "the batch)");
  return absl::FailedPreconditionError(s.failure);
#endif
}

}  // namespace mstep::dist
