/* Hostile paths and hostile numbers (issue 18, "nothing crashes, nothing trains on garbage"):
 *   - common/checked: the strict integer parser refuses what strtoll saturates or half-reads;
 *   - readers (tf_file_read, .npy, safetensors) refuse a FIFO, /dev/zero and a folder at once (an
 *     alarm fails the test instead of letting a blocking open hang it), and files above their bound;
 *   - outputs (common/atomic_file) write through symbolic links, refuse FIFOs, folders and device
 *     nodes without replacing them, and clean up the temporaries of saves killed mid-write;
 *   - checkpoint counters out of range or inconsistent are refused naming file, key and value, and
 *     leave the session untouched;
 *   - messages: NumPy's names for .npy types, "duplicate name" for a safetensors name given twice. */
#define _DEFAULT_SOURCE /* mknod, makedev */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>

#include "checkpoint_rewrite.h"
#include "common/atomic_file.h"
#include "common/checked.h"
#include "common/file.h"
#include "io_test.h"
#include "runtime/mapped_file.h"
#include "runtime/npy.h"
#include "runtime/safetensors.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"
#include "tightfit/zoo.h"

static tf_test_counts counts;

static double seconds_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- common/checked ---- */

static void test_checked(void) {
  printf("checked arithmetic and parsing:\n");
  static const struct {
    const char *text;
    int64_t minimum, maximum;
    tf_parse_result result;
    int64_t value;
  } cases[] = {
      {"0", 0, INT64_MAX, TF_PARSE_OK, 0},
      {"42", 0, INT64_MAX, TF_PARSE_OK, 42},
      {"007", 0, INT64_MAX, TF_PARSE_OK, 7},
      {"9223372036854775807", 0, INT64_MAX, TF_PARSE_OK, INT64_MAX},
      {"-9223372036854775808", INT64_MIN, 0, TF_PARSE_OK, INT64_MIN},
      {"9223372036854775808", 0, INT64_MAX, TF_PARSE_RANGE, 0},     /* strtoll: INT64_MAX, ERANGE */
      {"99999999999999999999999", 0, INT64_MAX, TF_PARSE_RANGE, 0}, /* strtoll: INT64_MAX */
      {"-9223372036854775809", INT64_MIN, 0, TF_PARSE_RANGE, 0},
      {"9007199254740993", 0, (int64_t)1 << 53, TF_PARSE_RANGE, 0},
      {"9007199254740992", 0, (int64_t)1 << 53, TF_PARSE_OK, (int64_t)1 << 53},
      {"-1", 0, 100, TF_PARSE_RANGE, 0}, /* a number, below the minimum (not "not a number") */
      {"-1", -5, 100, TF_PARSE_OK, -1},
      {"0", 1, 100, TF_PARSE_RANGE, 0},
      {"", 0, 100, TF_PARSE_SYNTAX, 0},
      {"-", -5, 100, TF_PARSE_SYNTAX, 0},
      {" 5", 0, 100, TF_PARSE_SYNTAX, 0}, /* strtoll skips spaces */
      {"5 ", 0, 100, TF_PARSE_SYNTAX, 0},
      {"+5", 0, 100, TF_PARSE_SYNTAX, 0},
      {"3e17", 0, INT64_MAX, TF_PARSE_SYNTAX, 0},
      {"0x10", 0, INT64_MAX, TF_PARSE_SYNTAX, 0},
      {"12abc", 0, INT64_MAX, TF_PARSE_SYNTAX, 0},
      {"99999999999999999999999x", 0, INT64_MAX, TF_PARSE_SYNTAX, 0}, /* garbage wins over range */
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    int64_t value = -12345;
    tf_parse_result result = tf_parse_i64(cases[i].text, cases[i].minimum, cases[i].maximum, &value);
    bool ok = result == cases[i].result && (result != TF_PARSE_OK ? value == -12345 : value == cases[i].value);
    CHECK(&counts, ok,
          "tf_parse_i64(\"%s\", %" PRId64 ", %" PRId64 "): result %d value %" PRId64 ", expected %d %" PRId64,
          cases[i].text, cases[i].minimum, cases[i].maximum, (int)result, value, (int)cases[i].result, cases[i].value);
  }
  printf("  tf_parse_i64: %zu texts (saturating, signed, spaced, hex, exponent, trailing) as expected\n",
         sizeof(cases) / sizeof(cases[0]));
  int64_t out = 7;
  CHECK(&counts, !tf_checked_add_i64(INT64_MAX, 1, &out) && out == 7, "INT64_MAX + 1 must be refused");
  CHECK(&counts, !tf_checked_add_i64(INT64_MIN, -1, &out) && out == 7, "INT64_MIN - 1 must be refused");
  CHECK(&counts, tf_checked_add_i64(INT64_MAX, -1, &out) && out == INT64_MAX - 1, "INT64_MAX - 1");
  CHECK(&counts, !tf_checked_mul_i64(300000000000000000, 32, &out), "3e17 x 32 must be refused");
  CHECK(&counts, !tf_checked_mul_i64(INT64_MIN, -1, &out), "INT64_MIN x -1 must be refused");
  CHECK(&counts, tf_checked_mul_i64((int64_t)1 << 31, (int64_t)1 << 31, &out) && out == (int64_t)1 << 62, "2^62");
  const int64_t shape[] = {1 << 20, 1 << 20, 1 << 20, 1 << 20};
  CHECK(&counts, !tf_checked_product_i64(shape, 4, &out), "2^80 elements must be refused");
  CHECK(&counts, tf_checked_product_i64(shape, 3, &out) && out == (int64_t)1 << 60, "2^60 elements");
  const int64_t negative[] = {4, -2};
  CHECK(&counts, !tf_checked_product_i64(negative, 2, &out), "a negative dimension must be refused");
  CHECK(&counts, tf_checked_product_i64(NULL, 0, &out) && out == 1, "a scalar has one element");
  printf("  add, mul, product: overflow at both ends refused, results exact below\n");
}

/* ---- readers ---- */

static void test_readers(const char *folder) {
  printf("readers refuse what is not a regular file, without blocking:\n");
  char fifo[4096], big[4096], small[4096];
  snprintf(fifo, sizeof(fifo), "%s/pipe.tfg", folder);
  CHECK(&counts, mkfifo(fifo, 0600) == 0, "mkfifo %s: %s", fifo, strerror(errno));
  void *data = NULL;
  size_t size = 0;
  tf_npy *npy = NULL;
  tf_safetensors *st = NULL;
  /* A FIFO without a writer: a blocking open never returns. The alarm set in main() turns a hang
   * into a failure. */
  double start = seconds_now();
  io_check_refusal(&counts, "FIFO as a graph", tf_file_read(fifo, &data, &size), TF_ERR_IO, "it is a FIFO", fifo);
  io_check_refusal(&counts, "FIFO as .npy", tf_npy_open(fifo, &npy), TF_ERR_IO, "not a regular file", fifo);
  io_check_refusal(&counts, "FIFO as safetensors", tf_safetensors_open(fifo, &st), TF_ERR_IO, "it is a FIFO", fifo);
  /* /dev/zero never ends: reading it to the end would fill memory. */
  io_check_refusal(&counts, "/dev/zero as a graph", tf_file_read("/dev/zero", &data, &size), TF_ERR_IO,
                   "it is a character device", "/dev/zero");
  io_check_refusal(&counts, "/dev/zero as .npy", tf_npy_open("/dev/zero", &npy), TF_ERR_IO, "character device",
                   "/dev/zero");
  io_check_refusal(&counts, "a folder as a graph", tf_file_read(folder, &data, &size), TF_ERR_IO, "it is a folder",
                   folder);
  double elapsed = seconds_now() - start;
  CHECK(&counts, elapsed < 2, "the refusals took %.3f s", elapsed);
  printf("  six refusals in %.3f s\n", elapsed);

  /* Bounds: a file above the bound is refused with its size and the bound, before it is read. */
  char bytes[100];
  memset(bytes, 'x', sizeof(bytes));
  CHECK(&counts, io_write_file(folder, "small.bin", bytes, sizeof(bytes), small, sizeof(small)), "write small.bin");
  io_check_refusal(&counts, "100 bytes, bound 64", tf_file_read_bounded(small, 64, "test files", &data, &size),
                   TF_ERR_IO, "100 bytes, more than the 64-byte bound for test files", small);
  CHECK_OK(&counts, tf_file_read_bounded(small, 100, "test files", &data, &size));
  CHECK(&counts, data && size == 100 && memcmp(data, bytes, 100) == 0, "100 bytes at bound 100: read %zu", size);
  free(data);
  data = NULL;
  /* A sparse graph one byte past the FlatBuffers limit: refused at once, not read for seconds. */
  snprintf(big, sizeof(big), "%s/big.tfg", folder);
  int fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  bool sparse = fd >= 0 && ftruncate(fd, (off_t)TF_FILE_FLATBUFFER_MAX_BYTES + 1) == 0;
  if (fd >= 0)
    close(fd);
  if (sparse) {
    start = seconds_now();
    io_check_refusal(&counts, "graph of 2 GiB", tf_file_read(big, &data, &size), TF_ERR_IO,
                     "2147483648 bytes, more than the 2147483647-byte bound for graph and plan files", big);
    CHECK(&counts, seconds_now() - start < 1, "the 2 GiB refusal took %.3f s", seconds_now() - start);
  } else {
    printf("  skipped: this file system cannot make a 2 GiB sparse file\n");
  }
  /* A sparse tensor file past 1 TiB. */
  fd = open(big, O_WRONLY | O_TRUNC, 0600);
  sparse = fd >= 0 && ftruncate(fd, (off_t)TF_FILE_TENSOR_MAX_BYTES + 1) == 0;
  if (fd >= 0)
    close(fd);
  if (sparse)
    io_check_refusal(&counts, "tensor file of 1 TiB", tf_npy_open(big, &npy), TF_ERR_IO,
                     "1099511627777 bytes, more than the 1099511627776-byte bound for tensor files", big);
  else
    printf("  skipped: this file system cannot make a 1 TiB sparse file\n");
  unlink(big);
}

/* ---- outputs ---- */

static bool file_holds(const char *path, const char *text) {
  size_t size;
  unsigned char *data = io_read_file(path, &size);
  bool same = data && size == strlen(text) && memcmp(data, text, size) == 0;
  free(data);
  return same;
}

static bool is_link(const char *path) {
  struct stat info;
  return lstat(path, &info) == 0 && S_ISLNK(info.st_mode);
}

/* Entries of `folder` whose name starts with `prefix` ".tmp". */
static int temporaries_of(const char *folder, const char *prefix) {
  DIR *dir = opendir(folder);
  if (!dir)
    return -1;
  char pattern[512];
  snprintf(pattern, sizeof(pattern), "%s.tmp", prefix);
  int count = 0;
  struct dirent *entry;
  while ((entry = readdir(dir)) != NULL)
    count += strncmp(entry->d_name, pattern, strlen(pattern)) == 0;
  closedir(dir);
  return count;
}

static void test_symlinks(const char *folder) {
  printf("outputs write through symbolic links:\n");
  char real[4096], link[4096], chain[4096], dangling[4096], created[4096], loop_a[4096], loop_b[4096];
  CHECK(&counts, io_write_file(folder, "real.bin", "old", 3, real, sizeof(real)), "write real.bin");
  CHECK(&counts, chmod(real, 0640) == 0, "chmod");
  snprintf(link, sizeof(link), "%s/link.bin", folder);
  snprintf(chain, sizeof(chain), "%s/chain.bin", folder);
  CHECK(&counts, symlink("real.bin", link) == 0, "symlink link.bin -> real.bin: %s", strerror(errno));
  CHECK(&counts, symlink(link, chain) == 0, "symlink chain.bin -> link.bin (absolute)");
  CHECK_OK(&counts, tf_atomic_file_write_all(link, "new", 3));
  struct stat info;
  CHECK(&counts, is_link(link), "link.bin must still be a symbolic link");
  CHECK(&counts, file_holds(real, "new"), "real.bin must hold what was written through link.bin");
  CHECK(&counts, stat(real, &info) == 0 && (info.st_mode & 07777) == 0640, "real.bin keeps mode 0640, has %o",
        (unsigned)(info.st_mode & 07777));
  CHECK_OK(&counts, tf_atomic_file_write_all(chain, "chained", 7));
  CHECK(&counts, is_link(chain) && is_link(link) && file_holds(real, "chained"), "a chain of two links is followed");
  snprintf(dangling, sizeof(dangling), "%s/dangling.bin", folder);
  snprintf(created, sizeof(created), "%s/created.bin", folder);
  CHECK(&counts, symlink("created.bin", dangling) == 0, "symlink dangling.bin -> created.bin");
  CHECK_OK(&counts, tf_atomic_file_write_all(dangling, "made", 4));
  CHECK(&counts, is_link(dangling) && file_holds(created, "made"), "a dangling link creates the file it names");
  snprintf(loop_a, sizeof(loop_a), "%s/loop_a", folder);
  snprintf(loop_b, sizeof(loop_b), "%s/loop_b", folder);
  CHECK(&counts, symlink("loop_b", loop_a) == 0 && symlink("loop_a", loop_b) == 0, "symlink loop");
  io_check_refusal(&counts, "a loop of links", tf_atomic_file_write_all(loop_a, "x", 1), TF_ERR_IO,
                   "symbolic links in a row", loop_a);
  CHECK(&counts,
        temporaries_of(folder, "real.bin") == 0 && temporaries_of(folder, "created.bin") == 0 &&
            temporaries_of(folder, "link.bin") == 0,
        "no temporaries left");
  printf("  link, chain and dangling link written through (links intact, mode kept); a loop refused\n");
}

static void check_special_output(const char *what, const char *path, const char *kind, mode_t type) {
  io_check_refusal(&counts, what, tf_atomic_file_write_all(path, "data", 4), TF_ERR_IO, kind, path);
  struct stat info;
  CHECK(&counts, lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == type, "%s must be left as it was", path);
}

static void test_special_outputs(const char *folder) {
  printf("outputs refuse special files and never replace them:\n");
  char fifo[4096], to_fifo[4096], sub[4096], device[4096];
  snprintf(fifo, sizeof(fifo), "%s/out.fifo", folder);
  snprintf(to_fifo, sizeof(to_fifo), "%s/to_fifo.bin", folder);
  snprintf(sub, sizeof(sub), "%s/sub", folder);
  CHECK(&counts, mkfifo(fifo, 0600) == 0, "mkfifo");
  CHECK(&counts, symlink("out.fifo", to_fifo) == 0, "symlink to_fifo.bin -> out.fifo");
  CHECK(&counts, mkdir(sub, 0700) == 0, "mkdir");
  check_special_output("a FIFO as output", fifo, "not a regular file (it is a FIFO)", S_IFIFO);
  check_special_output("a link to a FIFO", to_fifo, "to_fifo.bin -> ", S_IFLNK);
  struct stat info;
  CHECK(&counts, stat(fifo, &info) == 0 && S_ISFIFO(info.st_mode), "the FIFO behind the link stays a FIFO");
  check_special_output("a folder as output", sub, "it is a folder", S_IFDIR);
  /* A device node of our own (never /dev/null itself: a regression would replace it, as root). */
  snprintf(device, sizeof(device), "%s/null", folder);
  if (mknod(device, S_IFCHR | 0666, makedev(1, 3)) == 0) {
    check_special_output("a character device as output", device, "it is a character device", S_IFCHR);
    unlink(device);
  } else {
    printf("  skipped the device node (mknod: %s; needs root)\n", strerror(errno));
  }
  CHECK(&counts,
        temporaries_of(folder, "out.fifo") == 0 && temporaries_of(folder, "sub") == 0 &&
            temporaries_of(folder, "null") == 0,
        "no temporaries left beside refused outputs");
  rmdir(sub);
  unlink(fifo);
  unlink(to_fifo);
}

/* A child process opens a save of `target`, writes, and is killed before it commits. */
static void killed_save(const char *target) {
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    tf_atomic_file *file;
    static char block[1 << 16];
    tf_status status = tf_atomic_file_open(target, &file);
    if (!status)
      status = tf_atomic_file_write(file, block, sizeof(block));
    raise(SIGKILL);
    _exit(status ? 3 : 4);
  }
  int wstatus = 0;
  CHECK(&counts, child > 0 && waitpid(child, &wstatus, 0) == child && WIFSIGNALED(wstatus), "killed child");
}

static void test_leftovers(const char *folder) {
  printf("temporaries of killed saves are cleaned at the next save:\n");
  char target[4096], live[4200], ours[4200], other[4200], junk[4200];
  snprintf(target, sizeof(target), "%s/latest.safetensors", folder);
  killed_save(target);
  int after_one = temporaries_of(folder, "latest.safetensors");
  CHECK(&counts, after_one == 1, "one killed save leaves %d temporaries, expected 1", after_one);
  for (int i = 0; i < 9; i++)
    killed_save(target);
  int after_ten = temporaries_of(folder, "latest.safetensors");
  CHECK(&counts, after_ten == 1, "ten killed saves leave %d temporaries, expected 1 (each cleans the last)", after_ten);
  /* Temporaries that must stay: a running process's (the parent's), this process's, another
   * target's, and names that only look like temporaries. */
  snprintf(live, sizeof(live), "%s.tmp%ld", target, (long)getppid());
  snprintf(ours, sizeof(ours), "%s.tmp%ld.7", target, (long)getpid());
  snprintf(other, sizeof(other), "%s/other.bin.tmp%d", folder, 999999);
  snprintf(junk, sizeof(junk), "%s.tmp12ab", target);
  const char *keep[] = {live, ours, other, junk};
  for (size_t i = 0; i < 4; i++) {
    FILE *file = fopen(keep[i], "wb");
    CHECK(&counts, file != NULL, "create %s", keep[i]);
    if (file)
      fclose(file);
  }
  CHECK_OK(&counts, tf_atomic_file_write_all(target, "saved", 5));
  CHECK(&counts, file_holds(target, "saved"), "the save after the kills is complete");
  int kept = temporaries_of(folder, "latest.safetensors"), kept_other = temporaries_of(folder, "other.bin");
  CHECK(&counts, kept == 3 && kept_other == 1,
        "after the save: %d temporaries of latest.safetensors (expected 3: the live parent's, ours, the junk name), "
        "%d of other.bin (expected 1)",
        kept, kept_other);
  for (size_t i = 0; i < 4; i++)
    unlink(keep[i]);
  printf("  10 killed saves: %d leftover before the next save (was one per kill), 0 after; live and foreign kept\n",
         after_ten);
}

/* ---- checkpoint counters ---- */

typedef struct session_fixture {
  tf_plan *plan;
  tf_session *session;
} session_fixture;

static bool fixture_open(session_fixture *f) {
  tf_graph *graph = NULL;
  tf_status status = tf_zoo_build("mlp", NULL, 0, &graph);
  tf_compile_options options = tf_compile_options_default(TF_TARGET_CPU);
  options.bindings = "N=4";
  options.accumulate = 2;
  if (!status)
    status = tf_compile(graph, &options, &f->plan);
  tf_graph_destroy(graph);
  tf_session_options session_options = tf_session_options_default();
  if (!status)
    status = tf_session_create(f->plan, &session_options, &f->session);
  CHECK(&counts, status == NULL, "session for the mlp: %s", tf_status_message(status));
  tf_status_free(status);
  return status == NULL;
}

typedef struct counter_case {
  const char *what;
  const char *optimizer_step, *micro_step, *accumulate; /* NULL: key absent */
  const char *phrase;                                   /* NULL: loads */
} counter_case;

static void test_counters(const char *folder) {
  printf("checkpoint counters:\n");
  session_fixture f = {NULL, NULL};
  if (!fixture_open(&f)) {
    tf_plan_destroy(f.plan);
    return;
  }
  char saved[4096], bad[4096];
  snprintf(saved, sizeof(saved), "%s/saved.safetensors", folder);
  snprintf(bad, sizeof(bad), "%s/bad.safetensors", folder);
  CHECK_OK(&counts, tf_session_save(f.session, saved, NULL, 0));
  tf_safetensors *file = NULL;
  CHECK_OK(&counts, tf_safetensors_open(saved, &file));
  const char *accumulate = file ? tf_safetensors_metadata(file, "tightfit.accumulate") : NULL;
  CHECK(&counts, accumulate && strcmp(accumulate, "2") == 0, "a save records tightfit.accumulate = %s, expected 2",
        accumulate ? accumulate : "(none)");
  tf_safetensors_close(file);
  CHECK_OK(&counts, tf_session_load(f.session, saved));

  const counter_case cases[] = {
      {"saturating micro_step", "0", "99999999999999999999999", "2",
       "metadata 'tightfit.micro_step' is 99999999999999999999999, outside 0..9007199254740992"},
      {"micro_step 3e17 in full", "0", "300000000000000000", "2",
       "metadata 'tightfit.micro_step' is 300000000000000000, outside 0..9007199254740992"},
      {"optimizer_step INT64_MAX", "9223372036854775807", "9223372036854775807", "1",
       "metadata 'tightfit.optimizer_step' is 9223372036854775807, outside 0..9007199254740992"},
      {"negative micro_step", "0", "-1", "2", "metadata 'tightfit.micro_step' is -1, outside 0..9007199254740992"},
      {"micro_step with a space", "0", " 4", "2", "metadata 'tightfit.micro_step' is ' 4', not a decimal integer"},
      {"micro_step with trailing text", "2", "4steps", "2", "is '4steps', not a decimal integer"},
      {"accumulate 0", "2", "4", "0", "metadata 'tightfit.accumulate' is 0, outside 1..2147483647"},
      {"micro_step behind optimizer_step x k", "3", "5", "2",
       "'tightfit.micro_step' is 5, but 'tightfit.optimizer_step' 3 x 'tightfit.accumulate' 2 needs it in 6..7"},
      {"micro_step past optimizer_step x k", "3", "8", "2", "needs it in 6..7"},
      {"optimizer_step x k overflows", "9007199254740992", "9007199254740992", "2147483647", "overflows int64"},
      {"fewer micro than optimizer steps", "3", "2", NULL, "'tightfit.micro_step' is 2, fewer than"},
      {"2^53 micro-batches of 4 samples", "0", "9007199254740992", NULL,
       "micro-batches of 4 samples, more than 2^53 samples"},
      {"no micro_step", "3", NULL, "2", "not a tightfit checkpoint (no 'tightfit.micro_step' counter"},
      {"consistent counters", "5", "10", "2", NULL},
      {"mid-accumulation save", "5", "11", "2", NULL},
      {"a checkpoint from before tightfit.accumulate", "3", "6", NULL, NULL},
  };
  const char *keys[] = {"tightfit.optimizer_step", "tightfit.micro_step", "tightfit.accumulate"};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const counter_case *c = &cases[i];
    const char *values[] = {c->optimizer_step, c->micro_step, c->accumulate};
    tf_session_set_counters(f.session, 1, 2);
    CHECK_OK(&counts, tf_checkpoint_rewrite(saved, bad, keys, values, 3));
    tf_status status = tf_session_load(f.session, bad);
    if (c->phrase) {
      io_check_refusal(&counts, c->what, status, TF_ERR_INVALID_INPUT, c->phrase, bad);
      CHECK(&counts, tf_session_optimizer_steps(f.session) == 1 && tf_session_micro_steps(f.session) == 2,
            "%s: a refused checkpoint must leave the counters as they were", c->what);
    } else {
      CHECK(&counts, status == NULL, "%s: %s", c->what, tf_status_message(status));
      tf_status_free(status);
      int64_t optimizer = 0, micro = 0;
      (void)tf_parse_i64(c->optimizer_step, 0, INT64_MAX, &optimizer);
      (void)tf_parse_i64(c->micro_step, 0, INT64_MAX, &micro);
      CHECK(&counts, tf_session_optimizer_steps(f.session) == optimizer && tf_session_micro_steps(f.session) == micro,
            "%s: counters %" PRId64 "/%" PRId64 " after load", c->what, tf_session_optimizer_steps(f.session),
            tf_session_micro_steps(f.session));
      printf("  loaded   %-28s optimizer_step %s, micro_step %s\n", c->what, c->optimizer_step, c->micro_step);
    }
  }
  tf_session_destroy(f.session);
  tf_plan_destroy(f.plan);
}

/* ---- messages ---- */

static void write_npy_with_descr(const char *folder, const char *name, const char *descr, char *path, size_t capacity) {
  char header[128];
  int length = snprintf(header, sizeof(header), "{'descr': '%s', 'fortran_order': False, 'shape': (2,), }", descr);
  while ((10 + length + 1) % 64)
    header[length++] = ' ';
  header[length++] = '\n';
  unsigned char file[256] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)length, 0};
  memcpy(file + 10, header, (size_t)length);
  memset(file + 10 + length, 0, 32);
  CHECK(&counts, io_write_file(folder, name, file, 10 + (size_t)length + 32, path, capacity), "write %s", name);
}

static void test_messages(const char *folder) {
  printf("messages:\n");
  char path[4096];
  snprintf(path, sizeof(path), "%s/f64.npy", folder);
  const double values[2] = {1, 2};
  const int64_t shape[1] = {2};
  CHECK_OK(&counts, tf_npy_write(path, TF_FILE_F64, 1, shape, values));
  tf_npy *npy = NULL;
  CHECK_OK(&counts, tf_npy_open(path, &npy));
  const char *description = npy ? tf_npy_dtype_description(npy) : "";
  CHECK(&counts, strcmp(description, "float64 ('<f8')") == 0, "f64 .npy described as '%s'", description);
  printf("  an f64 .npy is described as %s\n", description);
  tf_npy_close(npy);
  static const struct {
    const char *descr, *phrase;
  } unsupported[] = {
      {"<u2", "holds uint16: unsupported dtype '<u2'; tightfit reads float32 '<f4', float64 '<f8'"},
      {"<c16", "holds complex128: unsupported dtype '<c16'"},
      {">f8", "holds big-endian float64: unsupported dtype '>f8'"},
      {"|b1", "holds bool: unsupported dtype '|b1'"},
      {"<M8[s]", "holds datetime64: unsupported dtype '<M8[s]'"},
  };
  for (size_t i = 0; i < sizeof(unsupported) / sizeof(unsupported[0]); i++) {
    write_npy_with_descr(folder, "other.npy", unsupported[i].descr, path, sizeof(path));
    io_check_refusal(&counts, unsupported[i].descr, tf_npy_open(path, &npy), TF_ERR_UNSUPPORTED, unsupported[i].phrase,
                     path);
  }
  /* The same name twice with the same range: a duplicate, which the offsets check used to call an
   * overlap. */
  const char header[] = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                        "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
  unsigned char file[256] = {0};
  size_t length = strlen(header);
  for (int b = 0; b < 8; b++)
    file[b] = (unsigned char)((uint64_t)length >> (8 * b));
  memcpy(file + 8, header, length);
  CHECK(&counts, io_write_file(folder, "dup.safetensors", file, 8 + length + 4, path, sizeof(path)), "write");
  tf_safetensors *st = NULL;
  tf_status status = tf_safetensors_open(path, &st);
  CHECK(&counts, status && !strstr(tf_status_message(status), "overlap"), "the duplicate is not called an overlap: %s",
        tf_status_message(status));
  io_check_refusal(&counts, "a name twice, same range", status, TF_ERR_INVALID_INPUT,
                   "duplicate name (tensor 'a' appears twice", path);
}

int main(void) {
  /* A blocking open or an endless read must fail the test, not hang it. */
  alarm(60);
  char *folder = io_scratch_create();
  if (!folder) {
    fprintf(stderr, "cannot create a scratch folder\n");
    return 1;
  }
  test_checked();
  test_readers(folder);
  test_symlinks(folder);
  test_special_outputs(folder);
  test_leftovers(folder);
  test_counters(folder);
  test_messages(folder);
  io_scratch_destroy(folder);
  return tf_test_finish("test_hostile_files", &counts);
}
