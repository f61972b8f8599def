/* consumer.c: a C program built against an installed mstep's C API
 * (find_package -> mstep::mstep_c, or pkg-config mstep-c): checks the
 * loaded library's API version against the header's, then creates and
 * releases a context. Exits nonzero on any failure. */
#include <stdio.h>

#include <mstep-c/mstep.h>

/* Prints and frees a failed status; returns 1 for a failure, 0 for NULL. */
static int failed(mstep_status* status, const char* what) {
  if (status == NULL) return 0;
  fprintf(stderr, "consumer_c: %s failed (code %d): %s\n", what,
          (int)mstep_status_code_of(status), mstep_status_message(status));
  mstep_status_free(status);
  return 1;
}

int main(void) {
  const int32_t version = mstep_c_api_version();
  if (version != MSTEP_C_API_VERSION) {
    fprintf(stderr, "consumer_c: libmstep_c is C API version %d, the header is %d\n",
            (int)version, (int)MSTEP_C_API_VERSION);
    return 1;
  }
  mstep_context* context = NULL;
  if (failed(mstep_context_create(&context), "mstep_context_create")) return 1;
  if (context == NULL) {
    fprintf(stderr, "consumer_c: mstep_context_create returned no context\n");
    return 1;
  }
  if (failed(mstep_context_release(context), "mstep_context_release")) return 1;
  printf("consumer_c: C API version %d, context created and released\n", (int)version);
  return 0;
}
