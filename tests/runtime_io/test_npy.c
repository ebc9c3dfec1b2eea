/* runtime/npy: NumPy's exact bytes for known arrays, round trips of every dtype, the three format
 * versions, unaligned and Python 2 files, a corpus of malformed files (each refused with its code
 * and a message naming the file and the problem), and the writer's errors and atomicity. */
#include "io_test.h"

#include <inttypes.h>
#include <stdint.h>

#include "runtime/npy.h"

static tf_test_counts counts;

/* Headers np.save (NumPy 1.24) writes for zero-filled arrays of these dtypes and shapes. */
static const struct {
  tf_dtype dtype;
  int32_t rank;
  int64_t shape[TF_MAX_RANK];
  const char header[129];
} golden[] = {
    {TF_F32,
     2,
     {3, 4},
     "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }                                "
     "                          \x0a"},
    {TF_FILE_F64,
     0,
     {0},
     "\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (), }                                    "
     "                          \x0a"},
    {TF_I32,
     1,
     {5},
     "\x93NUMPY\x01\x00v\x00{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }                                  "
     "                          \x0a"},
    {TF_U8,
     2,
     {0, 2},
     "\x93NUMPY\x01\x00v\x00{'descr': '|u1', 'fortran_order': False, 'shape': (0, 2), }                                "
     "                          \x0a"},
    {TF_F16,
     8,
     {2, 1, 1, 1, 1, 1, 1, 3},
     "\x93NUMPY\x01\x00v\x00{'descr': '<f2', 'fortran_order': False, 'shape': (2, 1, 1, 1, 1, 1, 1, 3), }              "
     "                          \x0a"},
    {TF_I64,
     1,
     {1234567},
     "\x93NUMPY\x01\x00v\x00{'descr': '<i8', 'fortran_order': False, 'shape': (1234567,), }                            "
     "                          \x0a"},
};

static int64_t count_of(int32_t rank, const int64_t *shape) {
  int64_t count = 1;
  for (int32_t d = 0; d < rank; d++)
    count *= shape[d];
  return count;
}

static void test_golden_headers(const char *folder) {
  printf("writer output equals np.save:\n");
  for (size_t i = 0; i < sizeof(golden) / sizeof(golden[0]); i++) {
    int64_t bytes = count_of(golden[i].rank, golden[i].shape) * tf_file_dtype_size(golden[i].dtype);
    void *zeros = calloc((size_t)bytes + 1, 1);
    char path[4096];
    snprintf(path, sizeof(path), "%s/golden%zu.npy", folder, i);
    CHECK_OK(&counts, tf_npy_write(path, golden[i].dtype, golden[i].rank, golden[i].shape, zeros));
    size_t size;
    unsigned char *written = io_read_file(path, &size);
    bool same = written && size == 128 + (size_t)bytes && memcmp(written, golden[i].header, 128) == 0 &&
                memcmp(written + 128, zeros, (size_t)bytes) == 0;
    CHECK(&counts, same, "golden %zu (%s): %zu bytes differ from np.save's", i, tf_file_dtype_name(golden[i].dtype),
          size);
    printf("  %-4s rank %d: %zu bytes, header identical: %s\n", tf_file_dtype_name(golden[i].dtype),
           (int)golden[i].rank, size, same ? "yes" : "NO");
    free(written);
    free(zeros);
  }
}

static void test_round_trips(const char *folder) {
  printf("round trips:\n");
  const tf_dtype dtypes[] = {TF_F32, TF_FILE_F64, TF_F16, TF_I32, TF_I64, TF_U8};
  const int64_t shapes[][TF_MAX_RANK] = {{0}, {7}, {2, 3, 5}, {2, 2, 2, 2, 2, 2, 2, 3}, {4, 0, 3}};
  const int32_t ranks[] = {0, 1, 3, 8, 3};
  for (size_t t = 0; t < sizeof(dtypes) / sizeof(dtypes[0]); t++)
    for (size_t s = 0; s < sizeof(ranks) / sizeof(ranks[0]); s++) {
      int64_t count = count_of(ranks[s], shapes[s]);
      size_t bytes = (size_t)(count * tf_file_dtype_size(dtypes[t]));
      unsigned char *data = malloc(bytes + 1);
      for (size_t j = 0; j < bytes; j++)
        data[j] = (unsigned char)(j * 37 + t);
      char path[4096];
      snprintf(path, sizeof(path), "%s/trip.npy", folder);
      CHECK_OK(&counts, tf_npy_write(path, dtypes[t], ranks[s], shapes[s], data));
      tf_npy *npy = NULL;
      tf_status status = tf_npy_open(path, &npy);
      CHECK(&counts, status == NULL, "%s", tf_status_message(status));
      tf_status_free(status);
      if (npy) {
        bool same = tf_npy_dtype(npy) == dtypes[t] && tf_npy_rank(npy) == ranks[s] && tf_npy_count(npy) == count &&
                    tf_npy_bytes(npy) == bytes && memcmp(tf_npy_shape(npy), shapes[s], (size_t)ranks[s] * 8) == 0 &&
                    (bytes == 0 || memcmp(tf_npy_data(npy), data, bytes) == 0) &&
                    (uintptr_t)tf_npy_data(npy) % (uintptr_t)tf_file_dtype_size(dtypes[t]) == 0 &&
                    strcmp(tf_npy_path(npy), path) == 0;
        CHECK(&counts, same, "%s rank %d: read back differs", tf_file_dtype_name(dtypes[t]), (int)ranks[s]);
        tf_npy_close(npy);
      }
      free(data);
    }
  printf("  6 dtypes x 5 shapes (scalar, [7], [2,3,5], rank 8, [4,0,3]) written and read back\n");
  CHECK(&counts, io_count_temporaries(folder) == 0, "temporary files left in %s", folder);
}

/* A file from a preamble (magic, version, header length of `length_bytes`), a header and data. */
static size_t build(unsigned char *out, int major, const char *header, size_t pad_to, const void *data,
                    size_t data_bytes) {
  size_t prefix = major == 1 ? 10 : 12, text = strlen(header);
  size_t header_bytes = text;
  while ((prefix + header_bytes + 1) % pad_to)
    header_bytes++;
  header_bytes++;
  memcpy(out, "\x93NUMPY", 6);
  out[6] = (unsigned char)major;
  out[7] = 0;
  for (size_t i = 0; i < prefix - 8; i++)
    out[8 + i] = (unsigned char)(header_bytes >> (8 * i));
  memcpy(out + prefix, header, text);
  memset(out + prefix + text, ' ', header_bytes - text - 1);
  out[prefix + header_bytes - 1] = '\n';
  memcpy(out + prefix + header_bytes, data, data_bytes);
  return prefix + header_bytes + data_bytes;
}

static void expect_values(const char *folder, const char *name, const unsigned char *file, size_t size, tf_dtype dtype,
                          int32_t rank, const int64_t *shape, const void *data) {
  char path[4096];
  io_write_file(folder, name, file, size, path, sizeof(path));
  tf_npy *npy = NULL;
  tf_status status = tf_npy_open(path, &npy);
  CHECK(&counts, status == NULL, "%s: %s", name, tf_status_message(status));
  tf_status_free(status);
  if (!npy)
    return;
  size_t bytes = (size_t)(count_of(rank, shape) * tf_file_dtype_size(dtype));
  bool same = tf_npy_dtype(npy) == dtype && tf_npy_rank(npy) == rank &&
              memcmp(tf_npy_shape(npy), shape, (size_t)rank * 8) == 0 && tf_npy_bytes(npy) == bytes &&
              memcmp(tf_npy_data(npy), data, bytes) == 0 &&
              (uintptr_t)tf_npy_data(npy) % (uintptr_t)tf_file_dtype_size(dtype) == 0;
  CHECK(&counts, same, "%s: values or shape differ", name);
  printf("  read %-22s %s rank %d, %zu bytes, data aligned\n", name, tf_file_dtype_name(dtype), (int)rank, bytes);
  tf_npy_close(npy);
}

static void test_variants(const char *folder) {
  printf("format variants:\n");
  unsigned char file[1024];
  const float values[6] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 65504.0f};
  const int64_t shape23[2] = {2, 3};
  size_t size = build(file, 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 64, values, 24);
  expect_values(folder, "v2.npy", file, size, TF_F32, 2, shape23, values);
  size = build(file, 3, "{\"descr\": \"<f4\", \"shape\": (2, 3,), \"fortran_order\": False}", 16, values, 24);
  expect_values(folder, "v3_reordered.npy", file, size, TF_F32, 2, shape23, values);
  size = build(file, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", 16, values, 24);
  expect_values(folder, "python2_long.npy", file, size, TF_F32, 2, shape23, values);
  /* 10 + 47 bytes of header: the data starts at byte 57, not a multiple of 4: read through a copy. */
  size = build(file, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 1, values, 24);
  CHECK(&counts, (size - 24) % 4 != 0, "the unaligned case is aligned (%zu)", size - 24);
  expect_values(folder, "unaligned.npy", file, size, TF_F32, 2, shape23, values);
  const int64_t one = 1;
  const unsigned char byte = 200;
  size = build(file, 1, "{'descr': '<u1', 'fortran_order': False, 'shape': (1,), }", 64, &byte, 1);
  expect_values(folder, "u1_little.npy", file, size, TF_U8, 1, &one, &byte);
}

typedef struct bad_case {
  const char *name;
  int major;
  const char *header; /* NULL: raw bytes below */
  size_t data_bytes;
  tf_code code;
  const char *phrase;
} bad_case;

static void test_bad_files(const char *folder) {
  printf("malformed files:\n");
  static const unsigned char zeros[256];
  static const bad_case cases[] = {
      {"big_endian.npy", 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8, TF_ERR_UNSUPPORTED,
       "unsupported dtype '>f4'"},
      {"fortran.npy", 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16, TF_ERR_UNSUPPORTED,
       "fortran_order"},
      {"object.npy", 1, "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", 16, TF_ERR_UNSUPPORTED,
       "unsupported dtype '|O'"},
      {"complex.npy", 1, "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16, TF_ERR_UNSUPPORTED,
       "unsupported dtype '<c8'"},
      {"bool.npy", 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", 2, TF_ERR_UNSUPPORTED,
       "unsupported dtype '|b1'"},
      {"structured.npy", 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8, TF_ERR_UNSUPPORTED,
       "structured"},
      {"missing_shape.npy", 1, "{'descr': '<f4', 'fortran_order': False, }", 4, TF_ERR_INVALID_INPUT,
       "lacks key 'shape'"},
      {"unknown_key.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1, }", 4,
       TF_ERR_INVALID_INPUT, "unknown key 'x'"},
      {"repeated_key.npy", 1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4,
       TF_ERR_INVALID_INPUT, "repeats key 'descr'"},
      {"rank9.npy", 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }", 1,
       TF_ERR_UNSUPPORTED, "more than 8 dimensions"},
      {"negative_dim.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 0, TF_ERR_INVALID_INPUT,
       "non-negative dimension"},
      {"huge_dim.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 0,
       TF_ERR_INVALID_INPUT, "non-negative dimension"},
      {"count_overflow.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4), }", 0,
       TF_ERR_INVALID_INPUT, "overflows"},
      {"size_lie_short.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000,), }", 64,
       TF_ERR_INVALID_INPUT, "(truncated)"},
      {"size_lie_long.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 16, TF_ERR_INVALID_INPUT,
       "(trailing bytes)"},
      {"not_a_tuple.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3), }", 12, TF_ERR_INVALID_INPUT,
       "not a tuple"},
      {"list_shape.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': [3], }", 12, TF_ERR_INVALID_INPUT,
       "'(' opening the shape"},
      {"garbage_header.npy", 1, "hello world", 0, TF_ERR_INVALID_INPUT, "'{' opening the header"},
      {"unterminated.npy", 1, "{'descr': '<f4', 'fortran_order': False", 0, TF_ERR_INVALID_INPUT, "ends early"},
      {"after_dict.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x", 4, TF_ERR_INVALID_INPUT,
       "only padding"},
      {"fortran_none.npy", 1, "{'descr': '<f4', 'fortran_order': None, 'shape': (1,), }", 4, TF_ERR_INVALID_INPUT,
       "True or False"},
      {"escape_in_descr.npy", 1, "{'descr': '<f\\4', 'fortran_order': False, 'shape': (1,), }", 4, TF_ERR_INVALID_INPUT,
       "dtype string"},
  };
  unsigned char file[1024];
  char path[4096];
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    size_t size = build(file, cases[i].major, cases[i].header, 64, zeros, cases[i].data_bytes);
    io_write_file(folder, cases[i].name, file, size, path, sizeof(path));
    tf_npy *npy = NULL;
    io_check_refusal(&counts, cases[i].name, tf_npy_open(path, &npy), cases[i].code, cases[i].phrase, path);
    CHECK(&counts, npy == NULL, "%s: handle returned on failure", cases[i].name);
  }

  /* Damage below the header dict: the preamble itself. */
  size_t good = build(file, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 64, zeros, 8);
  struct {
    const char *name;
    size_t size;
    size_t offset;
    unsigned char value;
    const char *phrase;
  } raw[] = {
      {"empty.npy", 0, 0, 0, "shorter than the 10-byte preamble"},
      {"short.npy", 9, 0, 0x93, "shorter than the 10-byte preamble"},
      {"bad_magic.npy", good, 1, 'X', "bad magic"},
      {"version4.npy", good, 6, 4, "version 4.0"},
      {"minor1.npy", good, 7, 1, "version 1.1"},
      {"header_zero.npy", good, 8, 0, "implausible npy header length 0"},
      {"header_past_end.npy", good, 9, 0x7f, "truncated: npy header"},
      {"truncated_header.npy", 40, 0, 0x93, "truncated: npy header"},
      {"truncated_data.npy", good - 3, 0, 0x93, "(truncated)"},
  };
  for (size_t i = 0; i < sizeof(raw) / sizeof(raw[0]); i++) {
    unsigned char copy[1024];
    memcpy(copy, file, good);
    if (raw[i].offset == 8) {
      copy[8] = copy[9] = 0;
    } else {
      copy[raw[i].offset] = raw[i].value;
    }
    io_write_file(folder, raw[i].name, copy, raw[i].size, path, sizeof(path));
    tf_npy *npy = NULL;
    io_check_refusal(&counts, raw[i].name, tf_npy_open(path, &npy),
                     strstr(raw[i].phrase, "version") ? TF_ERR_UNSUPPORTED : TF_ERR_INVALID_INPUT, raw[i].phrase, path);
  }
  /* A 2.0 header claiming 4 GiB. */
  size_t size = build(file, 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 64, zeros, 8);
  file[8] = file[9] = file[10] = file[11] = 0xff;
  io_write_file(folder, "huge_header.npy", file, size, path, sizeof(path));
  tf_npy *npy = NULL;
  io_check_refusal(&counts, "huge_header.npy", tf_npy_open(path, &npy), TF_ERR_INVALID_INPUT,
                   "implausible npy header length 4294967295", path);

  snprintf(path, sizeof(path), "%s/does_not_exist.npy", folder);
  io_check_refusal(&counts, "missing file", tf_npy_open(path, &npy), TF_ERR_IO, "cannot open", path);
  io_check_refusal(&counts, "a folder", tf_npy_open(folder, &npy), TF_ERR_IO, "not a regular file", folder);
}

static void test_writer_errors(const char *folder) {
  printf("writer errors and atomicity:\n");
  char path[4096];
  float data[4] = {1, 2, 3, 4};
  const int64_t shape[TF_MAX_RANK + 1] = {2, 2, 1, 1, 1, 1, 1, 1, 1};
  snprintf(path, sizeof(path), "%s/w.npy", folder);
  io_check_refusal(&counts, "bf16", tf_npy_write(path, TF_BF16, 2, shape, data), TF_ERR_UNSUPPORTED, "bf16", path);
  io_check_refusal(&counts, "rank 9", tf_npy_write(path, TF_F32, 9, shape, data), TF_ERR_INVALID_ARGUMENT, "rank 9",
                   path);
  const int64_t negative[1] = {-2};
  io_check_refusal(&counts, "negative dim", tf_npy_write(path, TF_F32, 1, negative, data), TF_ERR_INVALID_ARGUMENT,
                   "negative", path);
  io_check_refusal(&counts, "NULL data", tf_npy_write(path, TF_F32, 2, shape, NULL), TF_ERR_INVALID_ARGUMENT,
                   "NULL data", path);
  char missing[4096];
  snprintf(missing, sizeof(missing), "%s/no/such/folder/w.npy", folder);
  io_check_refusal(&counts, "missing folder", tf_npy_write(missing, TF_F32, 2, shape, data), TF_ERR_IO, "cannot create",
                   missing);

  /* Overwriting replaces the old file whole, and leaves no temporary behind. */
  CHECK_OK(&counts, tf_npy_write(path, TF_F32, 2, shape, data));
  float more[6] = {5, 6, 7, 8, 9, 10};
  const int64_t shape6[1] = {6};
  CHECK_OK(&counts, tf_npy_write(path, TF_F32, 1, shape6, more));
  tf_npy *npy = NULL;
  CHECK_OK(&counts, tf_npy_open(path, &npy));
  CHECK(&counts, npy && tf_npy_count(npy) == 6 && memcmp(tf_npy_data(npy), more, sizeof(more)) == 0,
        "overwrite did not replace the file");
  tf_npy_close(npy);
  CHECK(&counts, io_count_temporaries(folder) == 0, "temporary files left in %s", folder);
  printf("  overwrite replaced the file; no temporary left\n");
}

int main(void) {
  char *folder = io_scratch_create();
  if (!folder) {
    fprintf(stderr, "cannot create a scratch folder\n");
    return 1;
  }
  test_golden_headers(folder);
  test_round_trips(folder);
  test_variants(folder);
  test_bad_files(folder);
  test_writer_errors(folder);
  io_scratch_destroy(folder);
  return tf_test_finish("test_npy", &counts);
}
