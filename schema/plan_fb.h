/* The .tfplan plan file (schema/plan.fbs, identifier "TFPL") behind a C API: FlatBuffer bytes <-> tf_plan.
 *
 * Decoding checks structure only: the FlatBuffers Verifier, the file identifier, the plan version,
 * the fields a plan cannot do without (names, region sizes, the report), and the vector lengths the
 * C struct bounds (a shape of at most TF_MAX_RANK dims, at most TF_MAX_OUTPUTS outputs per step,
 * exactly one entry per region / role / phase, one live_bytes entry per step). Every value, enums
 * included, is copied as written; the invariants are tf_plan_verify()'s job (plan/plan_verify.c),
 * which tf_plan_parse() runs next. Implemented in C++ (schema/plan_fb.cc); no exception crosses
 * this API. */
#ifndef TIGHTFIT_SCHEMA_PLAN_FB_H
#define TIGHTFIT_SCHEMA_PLAN_FB_H

#include <stddef.h>

#include "tightfit/plan_types.h"
#include "tightfit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Decodes the `size` bytes at `data` (any alignment) into *plan, which the caller has zeroed; the
 * arrays and strings it fills are malloc'd and, on success and on error alike, the caller's to free
 * (tf_plan_destroy() frees a partly filled plan too). Error messages start with `source` (a file
 * name; NULL reads as "<memory>"). Malformed bytes give TF_ERR_INVALID_INPUT. */
tf_status tf_plan_fb_decode(const void *data, size_t size, const char *source, tf_plan *plan) TF_MUST_USE;

/* Encodes `plan` as a .tfplan FlatBuffer into *data (*size bytes), which the caller frees with
 * free(). plan->version is written as it is (tf_plan_serialize() verifies the plan first, so it is
 * then a version this build reads). Absent strings (NULL names) are written as absent fields.
 * Values the format cannot hold (an enum above its storage type, a rank above TF_MAX_RANK, negative
 * counts) give TF_ERR_INVALID_ARGUMENT. */
tf_status tf_plan_fb_encode(const tf_plan *plan, void **data, size_t *size) TF_MUST_USE;

/* Verifies the FlatBuffer at `data` and renders it as JSON text that
 * `flatc -b -I schema schema/plan.fbs` reads back (enums by name, every scalar shown). Only the
 * Verifier runs, so plans that tf_plan_parse() refuses can be shown too. The caller frees *json
 * with free(). Floating point values are rounded by flatc's printer (12 decimal places for double,
 * 6 for float). */
tf_status tf_plan_fb_to_json(const void *data, size_t size, char **json) TF_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
