/* The MNIST data of the examples: PRNG, synthetic set, IDX reading,
 * shuffle and batches (see mnist_data.h). Pure C11, no global state. */
#include "examples/common/mnist_data.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void set_error(char* error, size_t error_size, const char* format, ...) {
  if (error == NULL || error_size == 0) return;
  va_list args;
  va_start(args, format);
  vsnprintf(error, error_size, format, args);
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
    set_error(error, error_size, "out of memory for %lld samples", (long long)n);
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

/* Reads a big-endian 32-bit word; -1 at end of file. */
static int read_be32(FILE* f, uint32_t* out) {
  unsigned char b[4];
  if (fread(b, 1, 4, f) != 4) return -1;
  *out = ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | b[3];
  return 0;
}

/* Checks the IDX header of `f`: magic, then `num_dims` sizes into `dims`. */
static int read_header(FILE* f, const char* path, uint32_t magic, const char* kind, uint32_t* dims,
                       int num_dims, char* error, size_t error_size) {
  uint32_t got = 0;
  if (read_be32(f, &got) != 0 || got != magic) {
    set_error(error, error_size,
              "%s is not an IDX %s file (magic number %u, want %u); give --data the directory "
              "of the uncompressed MNIST files",
              path, kind, got, magic);
    return -1;
  }
  for (int i = 0; i < num_dims; ++i) {
    if (read_be32(f, &dims[i]) != 0) {
      set_error(error, error_size, "%s: the IDX header is truncated", path);
      return -1;
    }
  }
  return 0;
}

int mnist_read_idx(const char* images_path, const char* labels_path, mnist_dataset* out,
                   char* error, size_t error_size) {
  int status = -1;
  unsigned char* pixels = NULL;
  unsigned char* raw_labels = NULL;
  mnist_dataset d = {0};
  FILE* images = fopen(images_path, "rb");
  FILE* labels = fopen(labels_path, "rb");
  if (images == NULL || labels == NULL) {
    const char* path = images == NULL ? images_path : labels_path;
    set_error(error, error_size, "cannot open %s: %s", path, strerror(errno));
    goto done;
  }
  uint32_t image_dims[3], label_count;
  if (read_header(images, images_path, 2051, "image", image_dims, 3, error, error_size) != 0 ||
      read_header(labels, labels_path, 2049, "label", &label_count, 1, error, error_size) != 0)
    goto done;
  const uint32_t n = image_dims[0];
  if ((uint64_t)image_dims[1] * image_dims[2] != MNIST_PIXELS) {
    set_error(error, error_size, "%s: images are %ux%u, not 28x28", images_path, image_dims[1],
              image_dims[2]);
    goto done;
  }
  if (label_count != n) {
    set_error(error, error_size, "%s holds %u labels but %s holds %u images", labels_path,
              label_count, images_path, n);
    goto done;
  }
  pixels = malloc((size_t)n * MNIST_PIXELS);
  raw_labels = malloc(n > 0 ? n : 1);
  if (pixels == NULL || raw_labels == NULL || allocate(&d, n, error, error_size) != 0) {
    set_error(error, error_size, "out of memory reading %u images", n);
    goto done;
  }
  if (fread(pixels, 1, (size_t)n * MNIST_PIXELS, images) != (size_t)n * MNIST_PIXELS) {
    set_error(error, error_size, "%s is truncated: its header says %u images", images_path, n);
    goto done;
  }
  if (fread(raw_labels, 1, n, labels) != n) {
    set_error(error, error_size, "%s is truncated: its header says %u labels", labels_path, n);
    goto done;
  }
  for (size_t i = 0; i < (size_t)n * MNIST_PIXELS; ++i)
    d.images[i] = (pixels[i] / 255.0f - 0.1307f) / 0.3081f;
  for (uint32_t i = 0; i < n; ++i) {
    if (raw_labels[i] >= MNIST_CLASSES) {
      set_error(error, error_size, "%s: label %u of sample %u is not a digit", labels_path,
                raw_labels[i], i);
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
  if (images != NULL) fclose(images);
  if (labels != NULL) fclose(labels);
  return status;
}

int mnist_load(const char* dir, mnist_dataset* train, mnist_dataset* test, int* out_synthetic,
               char* error, size_t error_size) {
  if (out_synthetic != NULL) *out_synthetic = dir == NULL || dir[0] == '\0';
  if (dir == NULL || dir[0] == '\0') {
    if (mnist_synthetic(train, 12000, 1, error, error_size) != 0) return -1;
    if (mnist_synthetic(test, 2000, 2, error, error_size) != 0) {
      mnist_dataset_free(train);
      return -1;
    }
    return 0;
  }
  const size_t length = strlen(dir) + 64;
  char* images = malloc(length);
  char* labels = malloc(length);
  int status = -1;
  if (images == NULL || labels == NULL) {
    set_error(error, error_size, "out of memory");
  } else {
    snprintf(images, length, "%s/train-images-idx3-ubyte", dir);
    snprintf(labels, length, "%s/train-labels-idx1-ubyte", dir);
    if (mnist_read_idx(images, labels, train, error, error_size) == 0) {
      snprintf(images, length, "%s/t10k-images-idx3-ubyte", dir);
      snprintf(labels, length, "%s/t10k-labels-idx1-ubyte", dir);
      status = mnist_read_idx(images, labels, test, error, error_size);
      if (status != 0) mnist_dataset_free(train);
    }
  }
  free(images);
  free(labels);
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
