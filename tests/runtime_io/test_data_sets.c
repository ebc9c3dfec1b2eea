/* The checked-in data sets (models/data, made by scripts/make-data) open with runtime/npy and hold
 * what models/data/README.md promises: shapes, dtypes, value ranges, every class in both splits,
 * the [N, 64] and [N, 1, 8, 8] files equal, tokens ASCII. Runs from the source root. */
#include <inttypes.h>
#include <string.h>

#include "check.h"
#include "runtime/npy.h"

static tf_test_counts counts;

static tf_npy *open_checked(const char *path, tf_dtype dtype, int32_t rank, const int64_t *shape) {
  tf_npy *npy = NULL;
  tf_status status = tf_npy_open(path, &npy);
  CHECK(&counts, status == NULL, "%s", tf_status_message(status));
  tf_status_free(status);
  if (!npy)
    return NULL;
  bool ok = tf_npy_dtype(npy) == dtype && tf_npy_rank(npy) == rank;
  for (int32_t d = 0; ok && d < rank; d++)
    ok = shape[d] < 0 || tf_npy_shape(npy)[d] == shape[d];
  CHECK(&counts, ok, "%s: dtype %s rank %d differs from the expected", path, tf_file_dtype_name(tf_npy_dtype(npy)),
        (int)tf_npy_rank(npy));
  printf("  %-36s %s [", path, tf_file_dtype_name(tf_npy_dtype(npy)));
  for (int32_t d = 0; d < tf_npy_rank(npy); d++)
    printf("%s%" PRId64, d ? ", " : "", tf_npy_shape(npy)[d]);
  printf("]\n");
  if (!ok) {
    tf_npy_close(npy);
    return NULL;
  }
  return npy;
}

static void check_digits(const char *split, int64_t n) {
  char path[256];
  const int64_t x_shape[2] = {n, 64}, y_shape[1] = {n};
  snprintf(path, sizeof(path), "models/data/digits/%s/x.npy", split);
  tf_npy *x = open_checked(path, TF_F32, 2, x_shape);
  snprintf(path, sizeof(path), "models/data/digits/%s/labels.npy", split);
  tf_npy *y = open_checked(path, TF_I32, 1, y_shape);
  if (x && y) {
    const float *pixels = tf_npy_data(x);
    bool in_range = true, sixteenths = true;
    float high = 0;
    for (int64_t i = 0; i < n * 64; i++) {
      in_range = in_range && pixels[i] >= 0.0f && pixels[i] <= 1.0f;
      sixteenths = sixteenths && pixels[i] * 16.0f == (float)(int)(pixels[i] * 16.0f);
      high = pixels[i] > high ? pixels[i] : high;
    }
    CHECK(&counts, in_range && sixteenths && high == 1.0f, "%s pixels not k/16 in [0, 1] (max %g)", split, high);
    const int32_t *labels = tf_npy_data(y);
    int64_t per_class[10] = {0};
    bool valid = true;
    for (int64_t i = 0; i < n; i++) {
      valid = valid && labels[i] >= 0 && labels[i] <= 9;
      if (labels[i] >= 0 && labels[i] <= 9)
        per_class[labels[i]]++;
    }
    bool every_class = true;
    for (int c = 0; c < 10; c++)
      every_class = every_class && per_class[c] > 0;
    CHECK(&counts, valid && every_class, "%s labels outside 0..9 or a class missing", split);
    printf("    pixels k/16 in [0, 1], labels 0..9, per class:");
    for (int c = 0; c < 10; c++)
      printf(" %" PRId64, per_class[c]);
    printf("\n");
  }
  tf_npy_close(x);
  tf_npy_close(y);
}

static int64_t check_tokens(const char *path) {
  const int64_t any[1] = {-1};
  tf_npy *tokens = open_checked(path, TF_I32, 1, any);
  if (!tokens)
    return 0;
  const int32_t *ids = tf_npy_data(tokens);
  int64_t n = tf_npy_count(tokens);
  bool ascii = n > 0;
  for (int64_t i = 0; i < n; i++)
    ascii = ascii && ids[i] >= 0 && ids[i] < 128;
  CHECK(&counts, ascii, "%s: a token outside [0, 128)", path);
  tf_npy_close(tokens);
  return n;
}

int main(void) {
  printf("digits:\n");
  check_digits("train", 1437);
  check_digits("test", 360);
  printf("text:\n");
  int64_t train = check_tokens("models/data/text/train/tokens.npy");
  int64_t test = check_tokens("models/data/text/test/tokens.npy");
  /* The GPL-3 text is 35,149 bytes; the split is 90 / 10. */
  CHECK(&counts, train + test == 35149 && train == (train + test) * 9 / 10, "token split %" PRId64 " + %" PRId64, train,
        test);
  printf("    %" PRId64 " + %" PRId64 " tokens, all ASCII\n", train, test);
  FILE *vocab = fopen("models/data/text/vocab.txt", "r");
  int lines = 0;
  char line[64];
  while (vocab && fgets(line, sizeof(line), vocab))
    lines++;
  if (vocab)
    fclose(vocab);
  CHECK(&counts, lines == 128, "vocab.txt has %d lines, expected 128", lines);
  return tf_test_finish("test_data_sets", &counts);
}
