/* The report as one self-contained HTML page (`tightfit report --html`): the memory timeline inlined
 * as SVG and the same tables as the text report. No scripts, no network, no other files. */
#ifndef TIGHTFIT_TOOLS_REPORT_HTML_H
#define TIGHTFIT_TOOLS_REPORT_HTML_H

#include "tightfit/plan.h"
#include "tools/report.h"
#include "tools/report_svg.h"

/* Appends the whole page to `text`; options->source names the plan in the title. Check
 * text->failed afterwards. */
tf_status tf_report_html_page(tf_text *text, const tf_plan *plan, const tf_svg_options *options) TF_MUST_USE;

/* Writes the page to `path`, atomically; errors name `path`. */
tf_status tf_report_html_save(const char *path, const tf_plan *plan, const tf_svg_options *options) TF_MUST_USE;

#endif
