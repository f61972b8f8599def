/* The MNIST data of the examples: PRNG, synthetic set, IDX reading,
 * shuffle and batches (see mnist_data.h). C11 and zlib, no global state. */
#include "examples/common/mnist_data.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ---- PRNG ---------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void mnist_rng_seed(mnist_rng* rng, uint64_t seed) {
  /* splitmix64 never yields four zero words, the one state xoshiro must
   * not start from. */
  for (int i = 0; i < 4; ++i) rng->s[i] = splitmix64(&seed);
  rng->spare_normal = 0;
  rng->has_spare = 0;
}

uint64_t mnist_rng_next(mnist_rng* rng) {
  uint64_t* s = rng->s;
  const uint64_t result = rotl(s[1] * 5, 7) * 9;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double mnist_rng_uniform(mnist_rng* rng) { return (double)(mnist_rng_next(rng) >> 11) * 0x1.0p-53; }

uint64_t mnist_rng_below(mnist_rng* rng, uint64_t n) {
  /* Reject the top partial block of 2^64 so every residue is equally
   * likely: 2^64 mod n values are thrown away. */
  const uint64_t threshold = (0 - n) % n;
  for (;;) {
    const uint64_t r = mnist_rng_next(rng);
    if (r >= threshold) return r % n;
  }
}

double mnist_rng_normal(mnist_rng* rng) {
  if (rng->has_spare) {
    rng->has_spare = 0;
    return rng->spare_normal;
  }
  /* Box-Muller: u1 in (0, 1] keeps log() finite. */
  const double u1 = 1.0 - mnist_rng_uniform(rng);
  const double u2 = mnist_rng_uniform(rng);
  const double radius = sqrt(-2.0 * log(u1));
  const double angle = 6.283185307179586476925 * u2;
  rng->spare_normal = radius * sin(angle);
  rng->has_spare = 1;
  return radius * cos(angle);
}

/* ---- Data sets ----------------------------------------------------------- */

/* printf into `out` (`size` bytes) unless it is NULL: an error message, or
 * mnist_load's description of the data. */
static void write_message(char* out, size_t size, const char* format, ...) {
  if (out == NULL || size == 0) return;
  va_list args;
  va_start(args, format);
  vsnprintf(out, size, format, args);
  va_end(args);
}

void mnist_dataset_free(mnist_dataset* d) {
  if (d == NULL) return;
  free(d->images);
  free(d->labels);
  d->images = NULL;
  d->labels = NULL;
  d->size = 0;
}

/* Allocates the arrays of an n-sample data set. */
static int allocate(mnist_dataset* d, int64_t n, char* error, size_t error_size) {
  d->images = malloc((size_t)n * MNIST_PIXELS * sizeof(float));
  d->labels = malloc((size_t)n * sizeof(int64_t));
  d->size = n;
  if (n > 0 && (d->images == NULL || d->labels == NULL)) {
    mnist_dataset_free(d);
    write_message(error, error_size, "out of memory for %lld samples", (long long)n);
    return -1;
  }
  return 0;
}

int mnist_synthetic(mnist_dataset* out, int64_t n, uint64_t seed, char* error, size_t error_size) {
  float centres[MNIST_CLASSES * MNIST_PIXELS]; /* 31 KB */
  mnist_rng proto;
  mnist_rng_seed(&proto, 1234); /* the same class centres for every split */
  for (int i = 0; i < MNIST_CLASSES * MNIST_PIXELS; ++i)
    centres[i] = 0.3f * (float)mnist_rng_normal(&proto);

  mnist_dataset d = {0};
  if (allocate(&d, n, error, error_size) != 0) return -1;
  mnist_rng rng;
  mnist_rng_seed(&rng, seed);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = (int64_t)mnist_rng_below(&rng, MNIST_CLASSES);
    d.labels[i] = label;
    for (int64_t p = 0; p < MNIST_PIXELS; ++p)
      d.images[i * MNIST_PIXELS + p] =
          centres[label * MNIST_PIXELS + p] + (float)mnist_rng_normal(&rng);
  }
  *out = d;
  return 0;
}

/* ---- IDX files (gzipped or not) ----------------------------------------- */

/* zlib's gzread reads gzip files and passes other files through unchanged,
 * so one reader serves the MNIST files as distributed (.gz) and unpacked. */

/* What zlib says about `f` (opened from `path`) after a short read: its
 * error message, or that the file simply ended. */
static const char* read_problem(gzFile f, const char* path) {
  int code = Z_OK;
  const char* message = gzerror(f, &code);
  if (code == Z_OK || message == NULL || message[0] == '\0') return "the file ends early";
  /* zlib starts its message with "PATH: "; our messages name the file already. */
  const size_t length = strlen(path);
  if (strncmp(message, path, length) == 0 && strncmp(message + length, ": ", 2) == 0)
    message += length + 2;
  return message;
}

/* Reads `size` bytes; -1 when the file ends first or is corrupt. */
static int read_exact(gzFile f, void* out, size_t size) {
  /* gzread takes an unsigned count: read in pieces of at most 1 GiB. */
  unsigned char* p = out;
  while (size > 0) {
    const unsigned piece = size > (1u << 30) ? (1u << 30) : (unsigned)size;
    const int got = gzread(f, p, piece);
    if (got != (int)piece) return -1;
    p += piece;
    size -= piece;
  }
  return 0;
}

/* Reads a big-endian 32-bit word. */
static int read_be32(gzFile f, uint32_t* out) {
  unsigned char b[4];
  if (read_exact(f, b, 4) != 0) return -1;
  *out = ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | b[3];
  return 0;
}

/* Checks the IDX header of `f`: magic, then `num_dims` sizes into `dims`. */
static int read_header(gzFile f, const char* path, uint32_t magic, const char* kind, uint32_t* dims,
                       int num_dims, char* error, size_t error_size) {
  uint32_t got = 0;
  if (read_be32(f, &got) != 0) {
    write_message(error, error_size, "%s is truncated or corrupt: cannot read its IDX header (%s)",
                  path, read_problem(f, path));
    return -1;
  }
  if (got != magic) {
    write_message(error, error_size,
                  "%s is not an IDX %s file (magic number %u, want %u); give --data the directory "
                  "of the four MNIST-format IDX files (gzipped or not)",
                  path, kind, got, magic);
    return -1;
  }
  for (int i = 0; i < num_dims; ++i) {
    if (read_be32(f, &dims[i]) != 0) {
      write_message(error, error_size,
                    "%s is truncated or corrupt: cannot read its IDX header (%s)", path,
                    read_problem(f, path));
      return -1;
    }
  }
  return 0;
}

/* Reads the `size` bytes of data the header of `path` announced, then checks
 * that the file ends there: the last read makes zlib check the gzip trailer's
 * CRC and length, so a corrupt file does not pass for a short one. */
static int read_body(gzFile f, const char* path, void* out, size_t size, uint32_t count,
                     const char* what, char* error, size_t error_size) {
  if (read_exact(f, out, size) != 0) {
    write_message(error, error_size,
                  "%s is truncated or corrupt: its header says %u %s, but reading them failed: %s",
                  path, count, what, read_problem(f, path));
    return -1;
  }
  unsigned char extra;
  const int more = gzread(f, &extra, 1);
  if (more != 0) {
    if (more < 0)
      write_message(error, error_size, "%s is corrupt after its %u %s: %s", path, count, what,
                    read_problem(f, path));
    else
      write_message(error, error_size, "%s has data after the %u %s its header announces", path,
                    count, what);
    return -1;
  }
  return 0;
}

static gzFile open_idx(const char* path, char* error, size_t error_size) {
  errno = 0;
  gzFile f = gzopen(path, "rb");
  if (f == NULL)
    write_message(error, error_size, "cannot open %s: %s", path,
                  errno != 0 ? strerror(errno) : "out of memory");
  return f;
}

int mnist_read_idx(const char* images_path, const char* labels_path, mnist_dataset* out,
                   char* error, size_t error_size) {
  int status = -1;
  unsigned char* pixels = NULL;
  unsigned char* raw_labels = NULL;
  mnist_dataset d = {0};
  gzFile images = open_idx(images_path, error, error_size);
  gzFile labels = images == NULL ? NULL : open_idx(labels_path, error, error_size);
  if (images == NULL || labels == NULL) goto done;
  uint32_t image_dims[3], label_count;
  if (read_header(images, images_path, 2051, "image", image_dims, 3, error, error_size) != 0 ||
      read_header(labels, labels_path, 2049, "label", &label_count, 1, error, error_size) != 0)
    goto done;
  const uint32_t n = image_dims[0];
  if ((uint64_t)image_dims[1] * image_dims[2] != MNIST_PIXELS) {
    write_message(error, error_size, "%s: images are %ux%u, not 28x28", images_path, image_dims[1],
                  image_dims[2]);
    goto done;
  }
  if (label_count != n) {
    write_message(error, error_size, "%s holds %u labels but %s holds %u images", labels_path,
                  label_count, images_path, n);
    goto done;
  }
  pixels = malloc((size_t)n * MNIST_PIXELS + 1);
  raw_labels = malloc((size_t)n + 1);
  if (pixels == NULL || raw_labels == NULL || allocate(&d, n, error, error_size) != 0) {
    write_message(error, error_size, "out of memory reading %u images", n);
    goto done;
  }
  if (read_body(images, images_path, pixels, (size_t)n * MNIST_PIXELS, n, "images", error,
                error_size) != 0 ||
      read_body(labels, labels_path, raw_labels, n, n, "labels", error, error_size) != 0)
    goto done;
  for (size_t i = 0; i < (size_t)n * MNIST_PIXELS; ++i)
    d.images[i] = (pixels[i] / 255.0f - 0.1307f) / 0.3081f;
  for (uint32_t i = 0; i < n; ++i) {
    if (raw_labels[i] >= MNIST_CLASSES) {
      write_message(error, error_size, "%s: label %u of sample %u is not a class in [0, %d)",
                    labels_path, raw_labels[i], i, MNIST_CLASSES);
      goto done;
    }
    d.labels[i] = raw_labels[i];
  }
  *out = d;
  d = (mnist_dataset){0};
  status = 0;
done:
  mnist_dataset_free(&d);
  free(pixels);
  free(raw_labels);
  if (images != NULL) gzclose(images);
  if (labels != NULL) gzclose(labels);
  return status;
}

/* The four files of a data set, as MNIST names them. */
static const char* const kFileNames[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                          "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

static int is_readable(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f != NULL) fclose(f);
  return f != NULL;
}

/* The path of file `name` in `dir`: `name` itself when it exists, else
 * `name`.gz. Writes into `path` (`size` bytes); -1 when neither exists. */
static int find_file(const char* dir, const char* name, char* path, size_t size, char* error,
                     size_t error_size) {
  if ((size_t)snprintf(path, size, "%s/%s", dir, name) < size && is_readable(path)) return 0;
  if ((size_t)snprintf(path, size, "%s/%s.gz", dir, name) < size && is_readable(path)) return 0;
  write_message(error, error_size,
                "%s holds neither %s nor %s.gz; give --data the directory of the four MNIST-format "
                "IDX files (%s, %s, %s, %s, gzipped or not)",
                dir, name, name, kFileNames[0], kFileNames[1], kFileNames[2], kFileNames[3]);
  return -1;
}

const char* mnist_default_dir(void) {
  char path[256];
  const char* dir = MNIST_DEFAULT_DIR;
  for (int i = 0; i < 4; ++i)
    if (find_file(dir, kFileNames[i], path, sizeof path, NULL, 0) != 0) return NULL;
  return dir;
}

int mnist_load(const char* dir, int synthetic, mnist_dataset* train, mnist_dataset* test,
               char* what, size_t what_size, char* error, size_t error_size) {
  const int is_default = !synthetic && (dir == NULL || dir[0] == '\0');
  if (is_default) dir = mnist_default_dir();
  if (synthetic || dir == NULL) {
    if (mnist_synthetic(train, 12000, 1, error, error_size) != 0) return -1;
    if (mnist_synthetic(test, 2000, 2, error, error_size) != 0) {
      mnist_dataset_free(train);
      return -1;
    }
    write_message(what, what_size,
                  "a SYNTHETIC, learnable data set (10 Gaussian clusters in 784-d), %lld train and "
                  "%lld test samples (%s)",
                  (long long)train->size, (long long)test->size,
                  synthetic
                      ? "--synthetic"
                      : "Fashion-MNIST is not installed in " MNIST_DEFAULT_DIR
                        "; scripts/setup.sh installs it (Debian package dataset-fashion-mnist)");
    return 0;
  }
  const size_t length = strlen(dir) + 64;
  char* paths[4] = {NULL};
  int status = -1;
  for (int i = 0; i < 4; ++i) {
    paths[i] = malloc(length);
    if (paths[i] == NULL) {
      write_message(error, error_size, "out of memory");
      goto done;
    }
    if (find_file(dir, kFileNames[i], paths[i], length, error, error_size) != 0) goto done;
  }
  if (mnist_read_idx(paths[0], paths[1], train, error, error_size) != 0) goto done;
  if (mnist_read_idx(paths[2], paths[3], test, error, error_size) != 0) {
    mnist_dataset_free(train);
    goto done;
  }
  write_message(what, what_size, "%s from %s%s: %lld train and %lld test images",
                is_default ? "Fashion-MNIST" : "MNIST-format IDX files", dir,
                is_default ? " (the default; --data DIR reads other IDX files, --synthetic the "
                             "synthetic set)"
                           : "",
                (long long)train->size, (long long)test->size);
  status = 0;
done:
  for (int i = 0; i < 4; ++i) free(paths[i]);
  return status;
}

/* ---- Order and batches --------------------------------------------------- */

void mnist_identity_order(int64_t* order, int64_t n) {
  for (int64_t i = 0; i < n; ++i) order[i] = i;
}

void mnist_shuffle(int64_t* order, int64_t n, mnist_rng* rng) {
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = (int64_t)mnist_rng_below(rng, (uint64_t)i + 1);
    const int64_t t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
}

void mnist_batch(const mnist_dataset* d, const int64_t* order, int64_t first, int64_t rows,
                 float* images, int64_t* labels) {
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t row = order[first + i];
    memcpy(images + i * MNIST_PIXELS, d->images + row * MNIST_PIXELS, MNIST_PIXELS * sizeof(float));
    labels[i] = d->labels[row];
  }
}
