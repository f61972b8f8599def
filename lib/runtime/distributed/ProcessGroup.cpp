// The process group's shared internals: see ProcessGroup.h.
#include "lib/runtime/distributed/ProcessGroup.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mstep::dist {

State& state() {
  static State* s = new State();  // never destroyed: atexit order
  return *s;
}

Clock::time_point deadline_from_now() {
  return Clock::now() + std::chrono::microseconds(
                            static_cast<int64_t>(state().timeout * 1e6));
}

std::string seconds_text(double s) { return absl::StrCat(s, " s"); }

#if MSTEP_HAVE_MPI

namespace {
std::string note_text(const Note& n) {
  return std::string(n.what, strnlen(n.what, sizeof(n.what)));
}
}  // namespace

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, len);
}

absl::Status mpi_check(int code, absl::string_view call, absl::string_view what) {
  if (code == MPI_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", call, " failed: ", mpi_error(code)));
}

bool test_requests(std::vector<MPI_Request>& requests) {
  bool done = true;
  for (MPI_Request& r : requests) {
    int flag = 0;
    MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    done &= flag != 0;
  }
  return done;
}

void ArrivalNotes::post(State& s, absl::string_view what) {
  const int world = s.world;
  sent.seq = ++s.entered;
  std::memset(sent.what, 0, sizeof(sent.what));
  std::memcpy(sent.what, what.data(), std::min(what.size(), sizeof(sent.what) - 1));
  received.assign(world, Note{});
  requests.assign(2 * world, MPI_REQUEST_NULL);
  for (int p = 0; p < world; ++p) {
    if (p == s.rank) continue;
    MPI_Irecv(&received[p], sizeof(Note), MPI_BYTE, p, 0, s.notes, &requests[p]);
    MPI_Isend(&sent, sizeof(Note), MPI_BYTE, p, 0, s.notes, &requests[world + p]);
  }
}

std::vector<int> ArrivalNotes::missing(const State& s) const {
  std::vector<int> out;
  for (int p = 0; p < s.world; ++p)
    if (p != s.rank && requests[p] != MPI_REQUEST_NULL) out.push_back(p);
  return out;
}

std::vector<std::string> ArrivalNotes::out_of_step(const State& s, bool compare_what) const {
  std::vector<std::string> out;
  for (int p = 0; p < s.world; ++p) {
    if (p == s.rank || requests[p] != MPI_REQUEST_NULL) continue;
    const Note& n = received[p];
    if (n.seq != sent.seq || (compare_what && note_text(n) != note_text(sent)))
      out.push_back(absl::StrCat("rank ", p, " is at its collective #", n.seq, ", ",
                                 note_text(n)));
  }
  return out;
}

std::string ArrivalNotes::who_is_missing(const State& s) const {
  std::vector<int> m = missing(s);
  if (m.empty()) return "every rank arrived but the transfer did not complete";
  return absl::StrCat(m.size() == 1 ? "rank " : "ranks ", absl::StrJoin(m, ", "),
                      " never arrived");
}

#endif  // MSTEP_HAVE_MPI

}  // namespace mstep::dist
