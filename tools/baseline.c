/* The memory categories of a plan, read back from an earlier `check --json` and compared (see
 * tools/baseline.h). The reader checks the whole file as JSON (RFC 8259 grammar, nesting at most 64
 * deep), so a truncated or hand-edited baseline is an error with the byte offset, never a guess. */
#include "tools/baseline.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const tf_category_names[TF_CATEGORY_COUNT] = {"parameters", "gradients", "optimizer_state", "activations",
                                                          "workspace",  "inputs",    "device_overhead", "total"};

void tf_categories_of_plan(const tf_plan *plan, tf_categories *out) {
  memset(out, 0, sizeof(*out));
  int64_t workspace = 0;
  int32_t peak = plan->report.peak_step;
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    /* A workspace is never on another buffer's memory (alias_of is for activations): it counts at
     * all its live steps. */
    if (b->region == TF_REGION_ARENA && b->role == TF_ROLE_WORKSPACE && b->first_step <= peak && b->last_step >= peak)
      workspace += b->bytes;
  }
  int64_t arena = plan->region_bytes[TF_REGION_ARENA];
  if (workspace > arena)
    workspace = arena;
  out->bytes[0] = plan->region_bytes[TF_REGION_PARAMETERS];
  out->bytes[1] = plan->region_bytes[TF_REGION_GRADIENTS];
  out->bytes[2] = plan->region_bytes[TF_REGION_OPTIMIZER_STATE];
  out->bytes[3] = arena - workspace;
  out->bytes[4] = workspace;
  out->bytes[5] = plan->region_bytes[TF_REGION_IO];
  out->bytes[6] = tf_plan_overhead_bytes(plan);
  out->bytes[TF_CATEGORY_TOTAL] = tf_plan_device_total(plan);
  out->present = TF_CATEGORIES_ALL;
  snprintf(out->graph_name, sizeof(out->graph_name), "%s", plan->graph_name ? plan->graph_name : "");
  snprintf(out->target, sizeof(out->target), "%s", plan->target ? plan->target : "");
}

void tf_categories_json(const tf_categories *categories, tf_json *json) {
  tf_json_string(json, "graph_name", categories->graph_name);
  tf_json_begin_object(json, "categories");
  for (int c = 0; c < TF_CATEGORY_COUNT; c++)
    tf_json_int(json, tf_category_names[c], categories->bytes[c]);
  tf_json_end_object(json);
}

/* ---- reading: a strict JSON parser that keeps the few members the comparison needs ---- */

#define MAX_DEPTH 64
#define MAX_FILE_BYTES (16 << 20)

typedef struct reader {
  const char *path;
  const char *text;
  size_t length, at;
  tf_status error;
  tf_categories *out;
  bool has_categories;
} reader;

static bool fail(reader *r, const char *what) {
  if (!r->error)
    r->error = tf_status_new(TF_ERR_INVALID_INPUT,
                             "%s: not a `tightfit check --json` result: %s at byte %zu (the baseline file must be "
                             "the unchanged output of check --json)",
                             r->path, what, r->at);
  return false;
}

static void skip_space(reader *r) {
  while (r->at < r->length && strchr(" \t\r\n", r->text[r->at]) && r->text[r->at])
    r->at++;
}

static bool expect(reader *r, char c) {
  skip_space(r);
  if (r->at >= r->length || r->text[r->at] != c) {
    char what[48];
    snprintf(what, sizeof(what), r->at >= r->length ? "the file ends where '%c' belongs" : "expected '%c'", c);
    return fail(r, what);
  }
  r->at++;
  return true;
}

static bool hex4(reader *r) {
  for (int i = 0; i < 4; i++, r->at++)
    if (r->at >= r->length || !strchr("0123456789abcdefABCDEF", r->text[r->at]) || !r->text[r->at])
      return fail(r, "a bad \\u escape");
  return true;
}

/* A string into buf (truncated to size; non-ASCII escapes become '?'); buf may be NULL. */
static bool read_string(reader *r, char *buf, size_t size) {
  if (!expect(r, '"'))
    return false;
  size_t used = 0;
  for (;;) {
    if (r->at >= r->length)
      return fail(r, "an unterminated string");
    unsigned char c = (unsigned char)r->text[r->at++];
    if (c == '"')
      break;
    if (c < 0x20)
      return fail(r, "a control character in a string");
    if (c == '\\') {
      if (r->at >= r->length)
        return fail(r, "an unterminated string");
      char e = r->text[r->at++];
      const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
      const char *k = e ? strchr(from, e) : NULL;
      if (e == 'u') {
        if (!hex4(r))
          return false;
        c = '?';
      } else if (!k) {
        return fail(r, "a bad escape in a string");
      } else {
        c = (unsigned char)to[k - from];
      }
    }
    if (buf && used + 1 < size)
      buf[used++] = (char)c;
  }
  if (buf && size)
    buf[used] = '\0';
  return true;
}

/* A number; *integer gets its value when it is an integer that fits int64 (else *is_integer false). */
static bool read_number(reader *r, int64_t *integer, bool *is_integer) {
  size_t start = r->at;
  const char *t = r->text;
  if (r->at < r->length && t[r->at] == '-')
    r->at++;
  if (r->at >= r->length || t[r->at] < '0' || t[r->at] > '9')
    return fail(r, "a bad value");
  if (t[r->at] == '0')
    r->at++;
  else
    while (r->at < r->length && t[r->at] >= '0' && t[r->at] <= '9')
      r->at++;
  *is_integer = true;
  if (r->at < r->length && t[r->at] == '.') {
    *is_integer = false;
    r->at++;
    if (r->at >= r->length || t[r->at] < '0' || t[r->at] > '9')
      return fail(r, "a bad number");
    while (r->at < r->length && t[r->at] >= '0' && t[r->at] <= '9')
      r->at++;
  }
  if (r->at < r->length && (t[r->at] == 'e' || t[r->at] == 'E')) {
    *is_integer = false;
    r->at++;
    if (r->at < r->length && (t[r->at] == '+' || t[r->at] == '-'))
      r->at++;
    if (r->at >= r->length || t[r->at] < '0' || t[r->at] > '9')
      return fail(r, "a bad number");
    while (r->at < r->length && t[r->at] >= '0' && t[r->at] <= '9')
      r->at++;
  }
  if (*is_integer) {
    char digits[32];
    size_t n = r->at - start;
    if (n >= sizeof(digits)) {
      *is_integer = false;
      return true;
    }
    memcpy(digits, t + start, n);
    digits[n] = '\0';
    errno = 0;
    long long value = strtoll(digits, NULL, 10);
    *is_integer = errno == 0;
    *integer = value;
  }
  return true;
}

static bool read_value(reader *r, int depth, int where);

enum { ANYWHERE, TOP, CATEGORIES };

static bool read_member(reader *r, int depth, int where) {
  char key[64];
  size_t key_at = r->at;
  if (!read_string(r, key, sizeof(key)) || !expect(r, ':'))
    return false;
  skip_space(r);
  if (where == TOP && strcmp(key, "graph_name") == 0)
    return read_string(r, r->out->graph_name, sizeof(r->out->graph_name));
  if (where == TOP && strcmp(key, "target") == 0)
    return read_string(r, r->out->target, sizeof(r->out->target));
  if (where == TOP && strcmp(key, "categories") == 0) {
    if (r->at >= r->length || r->text[r->at] != '{')
      return fail(r, "\"categories\" is not an object");
    r->has_categories = true;
    return read_value(r, depth, CATEGORIES);
  }
  if (where == CATEGORIES) {
    for (int c = 0; c < TF_CATEGORY_COUNT; c++) {
      if (strcmp(key, tf_category_names[c]) != 0)
        continue;
      int64_t value = 0;
      bool is_integer = false;
      if (!read_number(r, &value, &is_integer))
        return false;
      if (!is_integer || value < 0) {
        r->at = key_at;
        return fail(r, "a category that is not a byte count (a non-negative integer)");
      }
      if (r->out->present & (1u << c)) {
        r->at = key_at;
        return fail(r, "a category given twice");
      }
      r->out->present |= 1u << c;
      r->out->bytes[c] = value;
      return true;
    }
  }
  return read_value(r, depth, ANYWHERE);
}

static bool read_value(reader *r, int depth, int where) {
  skip_space(r);
  if (r->at >= r->length)
    return fail(r, "the file ends where a value belongs");
  if (depth >= MAX_DEPTH)
    return fail(r, "nesting deeper than 64");
  char c = r->text[r->at];
  if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    r->at++;
    skip_space(r);
    if (r->at < r->length && r->text[r->at] == close) {
      r->at++;
      return true;
    }
    for (;;) {
      if (!(c == '{' ? read_member(r, depth + 1, where) : read_value(r, depth + 1, ANYWHERE)))
        return false;
      skip_space(r);
      if (r->at < r->length && r->text[r->at] == ',') {
        r->at++;
        skip_space(r);
        continue;
      }
      return expect(r, close);
    }
  }
  if (c == '"')
    return read_string(r, NULL, 0);
  static const char *const words[] = {"true", "false", "null"};
  for (size_t i = 0; i < 3; i++) {
    size_t n = strlen(words[i]);
    if (r->length - r->at >= n && memcmp(r->text + r->at, words[i], n) == 0) {
      r->at += n;
      return true;
    }
  }
  int64_t ignored;
  bool is_integer;
  return read_number(r, &ignored, &is_integer);
}

tf_status tf_categories_read(const char *path, tf_categories *out) {
  memset(out, 0, sizeof(*out));
  FILE *f = fopen(path, "rb");
  if (!f)
    return tf_status_new(TF_ERR_IO, "%s: cannot read the baseline: %s", path, strerror(errno));
  char *text = malloc(MAX_FILE_BYTES + 1);
  if (!text) {
    fclose(f);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: no memory to read the baseline", path);
  }
  size_t length = fread(text, 1, MAX_FILE_BYTES + 1, f);
  bool read_error = ferror(f);
  fclose(f);
  tf_status status = NULL;
  if (read_error)
    status = tf_status_new(TF_ERR_IO, "%s: cannot read the baseline: a read error", path);
  else if (length > MAX_FILE_BYTES)
    status = tf_status_new(TF_ERR_INVALID_INPUT, "%s: not a `tightfit check --json` result: larger than 16 MiB", path);
  if (status) {
    free(text);
    return status;
  }
  reader r = {.path = path, .text = text, .length = length, .out = out};
  skip_space(&r);
  if (r.at >= length)
    fail(&r, "the file is empty");
  else if (text[r.at] != '{')
    fail(&r, "it does not start with a JSON object");
  else if (read_value(&r, 0, TOP)) {
    skip_space(&r);
    if (r.at < length)
      fail(&r, "text after the JSON object");
  }
  free(text);
  if (r.error)
    return r.error;
  if (!r.has_categories)
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "%s: the result has no \"categories\" object (written by a tightfit without "
                         "--baseline support? run `tightfit check --json` again on the base commit)",
                         path);
  if (!out->present)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: \"categories\" holds none of %s, %s, %s, %s, %s, %s, %s, %s", path,
                         tf_category_names[0], tf_category_names[1], tf_category_names[2], tf_category_names[3],
                         tf_category_names[4], tf_category_names[5], tf_category_names[6], tf_category_names[7]);
  /* An older tightfit's result may lack a category added since: compared on what it has, and only
   * a result with every category can be checked to add up. */
  if (out->present != TF_CATEGORIES_ALL)
    return NULL;
  int64_t sum = 0;
  for (int c = 0; c < TF_CATEGORY_TOTAL; c++)
    sum = out->bytes[c] > INT64_MAX - sum ? INT64_MAX : sum + out->bytes[c];
  if (sum != out->bytes[TF_CATEGORY_TOTAL])
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "%s: the categories sum to %" PRId64 " bytes but \"total\" says %" PRId64
                         " (the file was edited or is damaged)",
                         path, sum, out->bytes[TF_CATEGORY_TOTAL]);
  return NULL;
}

tf_status tf_categories_check_same_model(const char *path, const tf_categories *baseline,
                                         const tf_categories *current) {
  if (baseline->graph_name[0] && strcmp(baseline->graph_name, current->graph_name) != 0)
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "%s: the baseline is for graph '%s', this check is for '%s' (compare a model with its own "
                         "earlier result)",
                         path, baseline->graph_name, current->graph_name);
  if (strcmp(baseline->target, current->target) != 0)
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "%s: the baseline was checked for target '%s', this check is for '%s' (use the same "
                         "--gpu/--target/--device as the baseline)",
                         path, baseline->target[0] ? baseline->target : "(none)", current->target);
  return NULL;
}

tf_status tf_categories_parse(const char *list, unsigned *set) {
  *set = 0;
  const char *item = list;
  for (;;) {
    size_t length = strcspn(item, ",");
    int found = -1;
    for (int c = 0; c < TF_CATEGORY_COUNT; c++)
      if (strlen(tf_category_names[c]) == length && strncmp(item, tf_category_names[c], length) == 0)
        found = c;
    if (found < 0)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                           "--max-growth-of %s: '%.*s' is not a category (a comma list of %s, %s, %s, %s, %s, %s, "
                           "%s, %s)",
                           list, (int)length, item, tf_category_names[0], tf_category_names[1], tf_category_names[2],
                           tf_category_names[3], tf_category_names[4], tf_category_names[5], tf_category_names[6],
                           tf_category_names[7]);
    *set |= 1u << found;
    if (!item[length])
      return NULL;
    item += length + 1;
  }
}

double tf_categories_growth(const tf_categories *baseline, const tf_categories *current, int c) {
  int64_t before = baseline->bytes[c], now = current->bytes[c];
  if (before == 0)
    return now == 0 ? 0.0 : INFINITY;
  return ((double)now - (double)before) / (double)before;
}

unsigned tf_categories_failed(const tf_categories *baseline, const tf_categories *current, double max_growth,
                              unsigned checked) {
  unsigned failed = 0;
  for (int c = 0; c < TF_CATEGORY_COUNT; c++) {
    const unsigned bit = 1u << c;
    if ((checked & baseline->present & current->present & bit) &&
        tf_categories_growth(baseline, current, c) > max_growth)
      failed |= bit;
  }
  return failed;
}

/* "grew by 12.70%", "shrank by 3.00%", "grew from 0 bytes", "did not change". */
static const char *describe_growth(const tf_categories *baseline, const tf_categories *current, int c, char *buf,
                                   size_t size) {
  const double growth = tf_categories_growth(baseline, current, c);
  if (isinf(growth))
    snprintf(buf, size, "grew from 0 bytes");
  else
    snprintf(buf, size, "%s by %.2f%%", growth >= 0 ? "grew" : "shrank", 100.0 * fabs(growth));
  return buf;
}

static void print_diff_json(const char *path, const tf_categories *baseline, const tf_categories *current,
                            double max_growth, unsigned checked, unsigned failed, tf_json *json) {
  const double growth = tf_categories_growth(baseline, current, TF_CATEGORY_TOTAL);
  tf_json_begin_object(json, "baseline");
  tf_json_string(json, "path", path);
  tf_json_double(json, "max_growth", max_growth);
  tf_json_double(json, "growth", isinf(growth) ? 1e308 : growth);
  tf_json_bool(json, "passed", !failed);
  tf_json_begin_array(json, "checked");
  for (int c = 0; c < TF_CATEGORY_COUNT; c++)
    if (checked & (1u << c))
      tf_json_string(json, NULL, tf_category_names[c]);
  tf_json_end_array(json);
  tf_json_begin_array(json, "failed");
  for (int c = 0; c < TF_CATEGORY_COUNT; c++)
    if (failed & (1u << c))
      tf_json_string(json, NULL, tf_category_names[c]);
  tf_json_end_array(json);
  tf_json_begin_object(json, "categories");
  for (int c = 0; c < TF_CATEGORY_COUNT; c++) {
    const unsigned bit = 1u << c;
    tf_json_begin_object(json, tf_category_names[c]);
    if (baseline->present & bit) {
      const double share = tf_categories_growth(baseline, current, c);
      tf_json_int(json, "baseline", baseline->bytes[c]);
      tf_json_int(json, "current", current->bytes[c]);
      tf_json_int(json, "change", current->bytes[c] - baseline->bytes[c]);
      tf_json_double(json, "growth", isinf(share) ? 1e308 : share);
    } else {
      tf_json_int(json, "current", current->bytes[c]);
    }
    tf_json_bool(json, "in_baseline", (baseline->present & bit) != 0);
    tf_json_bool(json, "checked", (checked & baseline->present & bit) != 0);
    tf_json_bool(json, "passed", !(failed & bit));
    tf_json_end_object(json);
  }
  tf_json_end_object(json);
  tf_json_end_object(json);
}

void tf_categories_print_diff(const char *path, const tf_categories *baseline, const tf_categories *current,
                              double max_growth, unsigned checked, FILE *out, tf_json *json) {
  const unsigned failed = tf_categories_failed(baseline, current, max_growth, checked);
  if (json) {
    print_diff_json(path, baseline, current, max_growth, checked, failed, json);
    return;
  }
  char growth[48];
  fprintf(out, "compared with %s (growth allowed: %.2f%% %s): %s\n", path, 100.0 * max_growth,
          checked == TF_CATEGORIES_ALL ? "in each category and the total" : "in the categories --max-growth-of names",
          failed ? "FAILS" : "passes");
  /* Each failing category with both numbers, then the total whatever it did: a growth hidden in a
   * large total (a small model's CUDA overhead) is named on its own line. */
  for (int c = 0; c <= TF_CATEGORY_TOTAL; c++) {
    const unsigned bit = 1u << c;
    if (!(failed & bit) && c != TF_CATEGORY_TOTAL)
      continue;
    if (!(baseline->present & bit)) {
      fprintf(out, "  total: not in the baseline, not compared\n");
      continue;
    }
    fprintf(out, "  %s %s: %" PRId64 " -> %" PRId64 " bytes (allowed: %.2f%%): %s\n", tf_category_names[c],
            describe_growth(baseline, current, c, growth, sizeof(growth)), baseline->bytes[c], current->bytes[c],
            100.0 * max_growth,
            failed & bit    ? "FAILS"
            : checked & bit ? "passes"
                            : "not checked");
  }
  fprintf(out, "  %-16s %16s %16s %16s %9s\n", "category", "baseline", "now", "change", "change%");
  for (int c = 0; c < TF_CATEGORY_COUNT; c++) {
    const unsigned bit = 1u << c;
    int64_t before = baseline->bytes[c], now = current->bytes[c], change = now - before;
    if (!(baseline->present & bit)) {
      fprintf(out, "  %-16s %16s %16" PRId64 " %16s %9s  (not in the baseline: not compared)\n", tf_category_names[c],
              "-", now, "-", "-");
      continue;
    }
    char share[24];
    if (before > 0)
      snprintf(share, sizeof(share), "%+.2f%%", 100.0 * (double)change / (double)before);
    else
      snprintf(share, sizeof(share), "%s", change ? "new" : "-");
    const char *mark = failed & bit                           ? "  <- over the allowed growth"
                       : change > 0 && c != TF_CATEGORY_TOTAL ? "  <-"
                                                              : "";
    fprintf(out, "  %-16s %16" PRId64 " %16" PRId64 " %+16" PRId64 " %9s%s%s\n", tf_category_names[c], before, now,
            change, share, mark, checked & bit ? "" : " (not checked)");
  }
}
