/* The memory timeline (tools/report_svg.c) and the HTML report (tools/report_html.c) on plans
 * compiled from the zoo: for every step the stacked arena bytes equal report.live_bytes and a
 * brute-force count of the live buffers, the persistent bands equal the region sizes, binning keeps
 * every bin's maximum and the peak, and the SVG is well-formed XML (even with hostile names) that
 * marks the peak; the HTML page carries the same numbers as the text report. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tightfit/compiler.h"
#include "tightfit/zoo.h"
#include "tools/cli.h"
#include "tools/report.h"
#include "tools/report_html.h"
#include "tools/report_svg.h"

/* ---- a small XML well-formedness checker: enough for what the SVG writer emits ---- */

static bool is_name_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == ':' || c == '.';
}

/* A valid UTF-8 sequence at p (no control characters but tab, newline, return): its length, else 0. */
static int utf8_char(const unsigned char *p) {
  if (p[0] < 0x80)
    return (p[0] >= 0x20 && p[0] != 0x7F) || p[0] == '\t' || p[0] == '\n' || p[0] == '\r' ? 1 : 0;
  int n = (p[0] & 0xE0) == 0xC0 ? 2 : (p[0] & 0xF0) == 0xE0 ? 3 : (p[0] & 0xF8) == 0xF0 ? 4 : 0;
  for (int i = 1; i < n; i++)
    if ((p[i] & 0xC0) != 0x80)
      return 0;
  return n;
}

/* "&amp;" and friends or "&#39;": the length of a valid reference at p, else 0. */
static int entity_length(const char *p) {
  static const char *const named[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
  for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++)
    if (strncmp(p, named[i], strlen(named[i])) == 0)
      return (int)strlen(named[i]);
  if (p[1] == '#') {
    int n = 2;
    while (p[n] >= '0' && p[n] <= '9')
      n++;
    return n > 2 && p[n] == ';' ? n + 1 : 0;
  }
  return 0;
}

/* Checks that `text` is one well-formed element (after an optional XML declaration): balanced and
 * properly nested tags, quoted attributes, valid references, valid UTF-8. On failure writes why to
 * `why` and returns false. `elements` gets the number of elements. */
static bool well_formed(const char *text, int *elements, char *why, size_t why_size) {
  enum { DEPTH = 64 };
  char stack[DEPTH][64];
  int depth = 0, roots = 0;
  *elements = 0;
  const char *p = text;
  if (strncmp(p, "<?xml", 5) == 0) {
    p = strstr(p, "?>");
    if (!p) {
      snprintf(why, why_size, "unterminated XML declaration");
      return false;
    }
    p += 2;
  }
  while (*p) {
    if (*p == '<') {
      if (strncmp(p, "<!--", 4) == 0) {
        const char *end = strstr(p, "-->");
        if (!end) {
          snprintf(why, why_size, "unterminated comment");
          return false;
        }
        p = end + 3;
        continue;
      }
      bool closing = p[1] == '/';
      const char *name = p + 1 + closing;
      size_t length = 0;
      while (is_name_char((unsigned char)name[length]))
        length++;
      if (length == 0 || length >= 64) {
        snprintf(why, why_size, "bad tag name at offset %td", p - text);
        return false;
      }
      p = name + length;
      if (closing) {
        while (*p == ' ' || *p == '\n')
          p++;
        if (*p != '>' || depth == 0 || strlen(stack[depth - 1]) != length ||
            strncmp(stack[depth - 1], name, length) != 0) {
          snprintf(why, why_size, "</%.*s> at offset %td does not close <%s>", (int)length, name, name - text,
                   depth ? stack[depth - 1] : "(nothing)");
          return false;
        }
        depth--;
        p++;
        continue;
      }
      if (depth == 0 && ++roots > 1) {
        snprintf(why, why_size, "a second root element at offset %td", name - text);
        return false;
      }
      (*elements)++;
      for (;;) { /* attributes */
        while (*p == ' ' || *p == '\n' || *p == '\t')
          p++;
        if (*p == '>' || (p[0] == '/' && p[1] == '>'))
          break;
        size_t attribute = 0;
        while (is_name_char((unsigned char)p[attribute]))
          attribute++;
        if (attribute == 0 || p[attribute] != '=' || (p[attribute + 1] != '"' && p[attribute + 1] != '\'')) {
          snprintf(why, why_size, "bad attribute in <%.*s> at offset %td", (int)length, name, p - text);
          return false;
        }
        char quote = p[attribute + 1];
        p += attribute + 2;
        while (*p && *p != quote) {
          int n = *p == '&' ? entity_length(p) : *p == '<' ? 0 : utf8_char((const unsigned char *)p);
          if (n == 0) {
            snprintf(why, why_size, "bad character in an attribute of <%.*s> at offset %td", (int)length, name,
                     p - text);
            return false;
          }
          p += n;
        }
        if (*p != quote) {
          snprintf(why, why_size, "unterminated attribute in <%.*s>", (int)length, name);
          return false;
        }
        p++;
      }
      if (*p == '/') {
        p += 2;
        continue;
      }
      if (depth == DEPTH) {
        snprintf(why, why_size, "nesting deeper than %d", DEPTH);
        return false;
      }
      memcpy(stack[depth], name, length);
      stack[depth++][length] = '\0';
      p++;
      continue;
    }
    int n = *p == '&' ? entity_length(p) : utf8_char((const unsigned char *)p);
    if (n == 0) {
      snprintf(why, why_size, "bad character or reference at offset %td", p - text);
      return false;
    }
    if (depth == 0 && *p != '\n' && *p != ' ') {
      snprintf(why, why_size, "text outside the root element at offset %td", p - text);
      return false;
    }
    p += n;
  }
  if (depth != 0 || roots != 1) {
    snprintf(why, why_size, "%d element(s) left open (<%s>), %d root(s)", depth, depth ? stack[depth - 1] : "", roots);
    return false;
  }
  return true;
}

/* ---- plans ---- */

static tf_plan *compile_zoo(tf_test_counts *c, const char *preset, const char *const *overrides, int32_t n_overrides,
                            const char *bindings, bool training, int32_t accumulate) {
  tf_graph *graph = NULL;
  tf_status status = tf_zoo_build(preset, overrides, n_overrides, &graph);
  CHECK(c, status == NULL, "zoo %s: %s", preset, tf_status_message(status));
  tf_status_free(status);
  if (!graph)
    return NULL;
  tf_compile_options options = tf_compile_options_default(TF_TARGET_CPU);
  options.bindings = bindings;
  options.training = training;
  options.accumulate = accumulate;
  tf_plan *plan = NULL;
  status = tf_compile(graph, &options, &plan);
  CHECK(c, status == NULL, "compile %s (%s): %s", preset, bindings, tf_status_message(status));
  tf_status_free(status);
  tf_graph_destroy(graph);
  return plan;
}

static int64_t aligned(int64_t bytes, int64_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

/* The stacking against report.live_bytes, the region sizes and a brute-force count per step. */
static void check_stacking(tf_test_counts *c, const char *label, const tf_plan *plan, const tf_timeline *t) {
  static const tf_region regions[] = {TF_REGION_PARAMETERS, TF_REGION_GRADIENTS, TF_REGION_OPTIMIZER_STATE,
                                      TF_REGION_IO};
  int64_t persistent = 0;
  for (int band = 0; band < TF_TIMELINE_PERSISTENT_BANDS; band++) {
    CHECK(c, t->persistent[band] == plan->region_bytes[regions[band]], "%s: band %d is %" PRId64 ", region %" PRId64,
          label, band, t->persistent[band], plan->region_bytes[regions[band]]);
    persistent += plan->region_bytes[regions[band]];
  }
  CHECK(c, t->persistent_total == persistent, "%s: persistent total", label);
  CHECK(c, t->persistent_total + plan->region_bytes[TF_REGION_ARENA] == tf_plan_total_bytes(plan),
        "%s: the bands and the arena make the plan's total", label);
  int32_t stack_mismatches = 0, brute_mismatches = 0;
  int64_t max_stack = 0, workspace_seen = 0;
  int32_t aliases = 0;
  for (int32_t id = 0; id < plan->n_buffers; id++)
    aliases += plan->buffers[id].alias_of >= 0;
  /* The brute force counts each memory once: buffers on one memory (an alias chain) share its
   * offset, and other live buffers never do (the verifier's sweep), so live offsets are distinct
   * memories. */
  int64_t *live = malloc(sizeof(int64_t) * (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1));
  for (int32_t s = 0; live && s < plan->n_steps; s++) {
    int64_t stack = t->activation_bytes[s] + t->workspace_bytes[s];
    stack_mismatches += stack != plan->report.live_bytes[s];
    int64_t activations = 0, workspaces = 0;
    int32_t n_live = 0;
    for (int32_t id = 0; id < plan->n_buffers; id++) {
      const tf_plan_buffer *b = &plan->buffers[id];
      if (b->region != TF_REGION_ARENA || b->first_step > s || b->last_step < s)
        continue;
      bool seen = false;
      for (int32_t k = 0; k < n_live && !seen; k++)
        seen = live[k] == b->offset;
      if (seen && b->bytes > 0)
        continue;
      if (b->bytes > 0)
        live[n_live++] = b->offset;
      if (b->role == TF_ROLE_WORKSPACE)
        workspaces += aligned(b->bytes, plan->alignment);
      else
        activations += aligned(b->bytes, plan->alignment);
    }
    brute_mismatches += activations != t->activation_bytes[s] || workspaces != t->workspace_bytes[s];
    if (stack > max_stack)
      max_stack = stack;
    workspace_seen += t->workspace_bytes[s];
  }
  CHECK(c, live != NULL, "%s: out of memory", label);
  free(live);
  CHECK(c, stack_mismatches == 0, "%s: %d steps where activations + workspace != report.live_bytes", label,
        stack_mismatches);
  CHECK(c, brute_mismatches == 0, "%s: %d steps differ from a brute-force count of live buffers", label,
        brute_mismatches);
  CHECK(c, max_stack == plan->report.arena_lower_bound, "%s: the tallest stack %" PRId64 " != lower bound %" PRId64,
        label, max_stack, plan->report.arena_lower_bound);
  printf("  %-28s %5d steps: stack == live_bytes at every step, bands == regions (%" PRId64
         " persistent bytes), tallest arena stack %" PRId64 " == lower bound, workspace present: %s, %d aliases\n",
         label, plan->n_steps, persistent, max_stack, workspace_seen > 0 ? "yes" : "no", aliases);
}

/* Every bin's chosen step holds its bin's maximum; the peak step is among the chosen steps. */
static void check_bins(tf_test_counts *c, const char *label, const tf_plan *plan, const tf_timeline *t,
                       int32_t max_bins) {
  int32_t *steps = malloc(sizeof(int32_t) * (size_t)max_bins);
  int32_t width = 0;
  int32_t n = tf_timeline_bins(t, max_bins, steps, &width);
  CHECK(c, n <= max_bins && n == (plan->n_steps + width - 1) / width, "%s: %d bins of width %d for %d steps (max %d)",
        label, n, width, plan->n_steps, max_bins);
  bool peak_kept = false, maxima = true;
  for (int32_t b = 0; b < n; b++) {
    int64_t chosen = t->activation_bytes[steps[b]] + t->workspace_bytes[steps[b]];
    for (int32_t s = b * width; s < (b + 1) * width && s < plan->n_steps; s++)
      maxima = maxima && t->activation_bytes[s] + t->workspace_bytes[s] <= chosen;
    maxima = maxima && steps[b] >= b * width && steps[b] < (b + 1) * width;
    peak_kept = peak_kept || chosen == plan->report.arena_lower_bound;
  }
  CHECK(c, maxima, "%s: a bin's chosen step is not its maximum", label);
  CHECK(c, peak_kept, "%s: binning lost the peak", label);
  printf("  %-28s %d bins of %d step(s) (at most %d): each keeps its maximum, the peak survives\n", label, n, width,
         max_bins);
  free(steps);
}

/* The SVG: well-formed, a peak marker whose label names the peak total and step, the budget. */
static void check_svg(tf_test_counts *c, const char *label, const tf_plan *plan, int64_t budget, size_t max_size) {
  tf_text text = {0};
  tf_text_printf(&text, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  tf_svg_options options = {"plan.tfplan", budget, 0};
  CHECK_OK(c, tf_report_svg_element(&text, plan, &options));
  CHECK(c, !text.failed && text.data, "%s: SVG text allocation", label);
  if (!text.data)
    return;
  char why[256] = "";
  int elements = 0;
  bool ok = well_formed(text.data, &elements, why, sizeof(why));
  CHECK(c, ok, "%s: SVG not well-formed: %s", label, why);
  CHECK(c, strstr(text.data, "peak") != NULL, "%s: no 'peak' in the SVG", label);

  tf_timeline t;
  CHECK_OK(c, tf_timeline_create(plan, &t));
  tf_text expected = {0};
  tf_report_peak_label(&expected, plan, &t);
  char human[32], needle[96];
  int32_t peak = plan->report.peak_step;
  tf_cli_bytes(t.persistent_total + plan->report.live_bytes[peak], human, sizeof(human));
  snprintf(needle, sizeof(needle), "peak %s at step %" PRId32 " (", human, peak);
  CHECK(c, expected.data && strncmp(expected.data, needle, strlen(needle)) == 0, "%s: peak label '%s' != '%s...'",
        label, expected.data ? expected.data : "", needle);
  CHECK(c, expected.data && strstr(text.data, expected.data), "%s: the SVG lacks the peak label '%s'", label,
        expected.data ? expected.data : "");
  CHECK(c, strstr(text.data, "class=\"peak\"") != NULL, "%s: no peak line", label);
  for (int band = 0; band < TF_BAND_COUNT; band++) {
    static const char *const legend[] = {"parameters + constants",    "gradients",
                                         "optimizer state",           "io (micro-batches)",
                                         "activations (arena, live)", "workspace (arena, live)"};
    CHECK(c, strstr(text.data, legend[band]) != NULL, "%s: legend lacks '%s'", label, legend[band]);
  }
  int64_t total = tf_plan_total_bytes(plan);
  if (budget > 0) {
    CHECK(c, strstr(text.data, "class=\"budget\"") && strstr(text.data, "budget-label"), "%s: no budget line", label);
    const char *verdict = total > budget ? "exceeds the " : "fits the ";
    const char *title_end = strstr(text.data, "</title>");
    const char *found = strstr(text.data, verdict);
    CHECK(c, found && title_end && found < title_end, "%s: the title does not say the total %s the budget", label,
          verdict);
  } else {
    CHECK(c, !strstr(text.data, "class=\"budget\"") && !strstr(text.data, "budget-label"),
          "%s: a budget drawn without one", label);
  }
  CHECK(c, text.size <= max_size, "%s: SVG of %zu bytes (at most %zu)", label, text.size, max_size);
  printf("  %-28s SVG well-formed: %d elements, %zu bytes, 'peak' label '%s'%s\n", label, elements, text.size,
         expected.data ? expected.data : "", budget > 0 ? (total > budget ? ", over budget" : ", within budget") : "");
  tf_timeline_destroy(&t);
  free(expected.data);
  free(text.data);
}

/* The HTML page: the SVG inlined and the text report's numbers, nothing fetched from outside. */
static void check_html(tf_test_counts *c, const char *label, const tf_plan *plan) {
  tf_text text = {0};
  tf_svg_options options = {"plan.tfplan", 0, 0};
  CHECK_OK(c, tf_report_html_page(&text, plan, &options));
  if (!text.data)
    return;
  char total[32], bound[32], exact[32];
  tf_report_summary s = tf_report_summarise(plan);
  const char *needles[] = {
      "<!DOCTYPE html>",
      "<svg",
      "</svg>",
      "peak ",
      tf_cli_count(s.total, total, sizeof(total)),
      tf_cli_bytes(plan->report.arena_lower_bound, bound, sizeof(bound)),
      tf_cli_count(s.naive_total, exact, sizeof(exact)),
      "accumulation step",
      "<title>tightfit report: plan.tfplan</title>",
  };
  for (size_t i = 0; i < sizeof(needles) / sizeof(needles[0]); i++)
    CHECK(c, strstr(text.data, needles[i]) != NULL, "%s: the HTML lacks '%s'", label, needles[i]);
  if (plan->report.peak_step >= 0)
    CHECK(c, strstr(text.data, plan->steps[plan->report.peak_step].name) != NULL, "%s: the HTML lacks the peak step",
          label);
  tf_report_row rows[TF_REPORT_MAX_ROWS];
  int n = tf_report_memory_rows(plan, rows);
  int found = 0;
  for (int i = 0; i < n; i++) {
    char count[32];
    found += strstr(text.data, tf_cli_count(rows[i].bytes, count, sizeof(count))) != NULL;
  }
  CHECK(c, found == n, "%s: %d of %d memory rows' exact bytes in the HTML", label, found, n);
  const char *outside[] = {"http://", "https://", "<script", "src=", "@import", "url("};
  int external = 0;
  for (size_t i = 0; i < sizeof(outside) / sizeof(outside[0]); i++) {
    const char *hit = strstr(text.data, outside[i]);
    /* The SVG namespace is an identifier, not a fetch. */
    while (hit && strncmp(hit, "http://www.w3.org/2000/svg", 26) == 0)
      hit = strstr(hit + 1, outside[i]);
    external += hit != NULL;
  }
  CHECK(c, external == 0, "%s: the HTML refers to something outside itself", label);
  printf("  %-28s HTML %zu bytes: SVG inlined, %d memory rows, totals and peak as in the text report, self-contained\n",
         label, text.size, n);
  free(text.data);
}

/* Hostile names (markup, quotes, control characters, broken UTF-8) keep the SVG well-formed. */
static void check_hostile_names(tf_test_counts *c, tf_plan *plan) {
  static const char hostile[] = "<script>&amp;\"'\x01\x7f\xff\xc3(\xe2\x82 caf\xc3\xa9 ]]> &#x;";
  int32_t peak = plan->report.peak_step;
  free(plan->steps[peak].name);
  plan->steps[peak].name = malloc(sizeof(hostile));
  memcpy(plan->steps[peak].name, hostile, sizeof(hostile));
  free(plan->graph_name);
  plan->graph_name = malloc(sizeof(hostile));
  memcpy(plan->graph_name, hostile, sizeof(hostile));
  tf_text text = {0};
  tf_svg_options options = {"a<b>&\"c'.tfplan", 1, 0};
  CHECK_OK(c, tf_report_svg_element(&text, plan, &options));
  char why[256] = "";
  int elements = 0;
  bool ok = text.data && well_formed(text.data, &elements, why, sizeof(why));
  CHECK(c, ok, "hostile names: SVG not well-formed: %s", why);
  CHECK(c, text.data && !strstr(text.data, "<script"), "hostile names: markup got through");
  CHECK(c, text.data && strstr(text.data, "caf\xc3\xa9"), "hostile names: valid UTF-8 was not kept");
  tf_text html = {0};
  CHECK_OK(c, tf_report_html_page(&html, plan, &options));
  CHECK(c, html.data && !strstr(html.data, "<script"), "hostile names: markup got into the HTML");
  printf("  hostile step, graph and file names: SVG well-formed (%d elements), HTML escaped\n", elements);
  free(text.data);
  free(html.data);
}

static void check_plan(tf_test_counts *c, const char *label, tf_plan *plan, int64_t budget, size_t max_svg) {
  if (!plan)
    return;
  tf_timeline t;
  tf_status status = tf_timeline_create(plan, &t);
  CHECK(c, status == NULL, "%s: timeline: %s", label, tf_status_message(status));
  tf_status_free(status);
  if (!status) {
    check_stacking(c, label, plan, &t);
    check_bins(c, label, plan, &t, TF_TIMELINE_MAX_POINTS);
    check_bins(c, label, plan, &t, 97);
    tf_timeline_destroy(&t);
  }
  check_svg(c, label, plan, budget, max_svg);
  check_html(c, label, plan);
}

static void check_text_buffer(tf_test_counts *c) {
  tf_text text = {0};
  tf_text_escaped(&text,
                  "ab\xc3\xa9"
                  "cdef",
                  3);
  CHECK(c, text.data && strcmp(text.data, "ab\xc3\xa9\xe2\x80\xa6") == 0, "escape with a limit: '%s'",
        text.data ? text.data : "");
  text.size = 0;
  tf_text_escaped_span(&text, "x<y\nz", 3, 0);
  CHECK(c, text.data && strcmp(text.data, "x&lt;y") == 0, "escape a span: '%s'", text.data ? text.data : "");
  text.size = 0;
  for (int i = 0; i < 10000; i++)
    tf_text_printf(&text, "%d,", i);
  CHECK(c, !text.failed && text.size == 48890, "10000 appends: %zu bytes", text.size);
  free(text.data);
  printf("  text buffer: escaping with a character limit, spans, growth\n");
}

/* The well-formedness check itself refuses what an XML parser refuses. */
static void check_checker(tf_test_counts *c) {
  static const char *const good[] = {"<a/>",
                                     "<?xml version=\"1.0\"?>\n<a x=\"1&amp;2\"><b>t &lt; &#39;</b><!-- c --></a>\n"};
  static const char *const bad[] = {"<a><b></a></b>", "<a x=1/>",    "<a>&bogus;</a>",
                                    "<a>\xff</a>",    "<a></a><b/>", "<a>",
                                    "<a x=\"<\"/>",   "<a>\x01</a>", "text<a/>"};
  char why[256];
  int elements, refused = 0;
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
    CHECK(c, well_formed(good[i], &elements, why, sizeof(why)), "checker refused '%s': %s", good[i], why);
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    bool ok = well_formed(bad[i], &elements, why, sizeof(why));
    CHECK(c, !ok, "checker accepted '%s'", bad[i]);
    refused += !ok;
  }
  printf("  XML checker: accepts %zu well-formed documents, refuses %d broken ones\n", sizeof(good) / sizeof(good[0]),
         refused);
}

int main(void) {
  tf_test_counts c = {0, 0};
  printf("report timeline and HTML:\n");
  check_checker(&c);
  check_text_buffer(&c);

  tf_plan *gpt = compile_zoo(&c, "gpt", NULL, 0, "N=4,T=16", true, 1);
  if (gpt) {
    int64_t total = tf_plan_total_bytes(gpt);
    check_plan(&c, "gpt N=4,T=16", gpt, 0, 200000);
    check_svg(&c, "gpt, budget under total", gpt, total - 1, 200000);
    check_svg(&c, "gpt, budget over total", gpt, total + 1, 200000);
    check_hostile_names(&c, gpt);
  }
  tf_plan_destroy(gpt);

  tf_plan *inference = compile_zoo(&c, "gpt", NULL, 0, "N=2,T=32", false, 1);
  check_plan(&c, "gpt inference N=2,T=32", inference, 0, 200000);
  tf_plan_destroy(inference);

  tf_plan *mlp = compile_zoo(&c, "mlp", NULL, 0, "N=32", true, 2);
  check_plan(&c, "mlp N=32, accumulate 2", mlp, 0, 200000);
  tf_plan_destroy(mlp);

  /* Thousands of steps: the SVG keeps at most TF_TIMELINE_MAX_POINTS x points and stays small. */
  const char *const deep[] = {"layers=40"};
  tf_plan *big = compile_zoo(&c, "gpt", deep, 1, "N=2,T=16", true, 4);
  if (big) {
    CHECK(&c, big->n_steps > TF_TIMELINE_MAX_POINTS, "the deep gpt has %d steps", big->n_steps);
    check_plan(&c, "gpt 40 layers, accumulate 4", big, 1 << 20, 250000);
  }
  tf_plan_destroy(big);
  return tf_test_finish("test_report", &c);
}
