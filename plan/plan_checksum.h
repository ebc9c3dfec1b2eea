/* The checksum trailer of plan files (issue 49): a .tfplan written by tightfit ends with 16 bytes
 * after its FlatBuffer, the XXH64 of the FlatBuffer's bytes (little-endian) and the marker
 * "TFPLXX64". A flipped bit that the Verifier and the plan's invariants let through (a weight's
 * initialiser, a step's attribute) is refused by it. A file without the trailer (an older tightfit's,
 * tests/data/compat) loads unchecked, as before: a damaged marker can only hide the check, never
 * change the plan, since the FlatBuffer itself is then what the Verifier reads. */
#ifndef TIGHTFIT_PLAN_CHECKSUM_H
#define TIGHTFIT_PLAN_CHECKSUM_H

#include <stdbool.h>
#include <stddef.h>

#include "tightfit/status.h"

#define TF_PLAN_TRAILER_BYTES 16

/* Appends the trailer to the FlatBuffer in *data (*size bytes, malloc'd): *data grows by
 * TF_PLAN_TRAILER_BYTES. */
tf_status tf_plan_checksum_append(void **data, size_t *size) TF_MUST_USE;
/* The FlatBuffer's size: size, or size - TF_PLAN_TRAILER_BYTES when the bytes end in a trailer
 * (*has_trailer says which). */
size_t tf_plan_checksum_body(const void *data, size_t size, bool *has_trailer);
/* Compares a trailer's checksum with the FlatBuffer's bytes; an error names `source`. */
tf_status tf_plan_checksum_check(const void *data, size_t size, const char *source) TF_MUST_USE;

#endif
