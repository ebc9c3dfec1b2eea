/* Backend parity for the Vulkan training tests: run one graph on the CPU backend and on Vulkan with
 * the same parameters and data, and compare what comes out. Each graph is compiled twice (for the
 * cpu and the vulkan target: their alignment and workspaces differ); both sessions share the seed,
 * so the parameters start equal. The per-op checks are the conformance suite's (tests/conformance). */
#ifndef TIGHTFIT_TESTS_VULKAN_PARITY_H
#define TIGHTFIT_TESTS_VULKAN_PARITY_H

#include <stdint.h>

#include "check.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"

/* |vulkan - cpu| <= atol + rtol |cpu|, element by element. */
typedef struct parity_tolerance {
  double atol, rtol;
} parity_tolerance;

/* The worst error seen, as a fraction of the tolerance (<= 1 passes), and where. */
typedef struct parity_result {
  double worst_ratio, worst_abs;
  char worst_buffer[128];
} parity_result;

/* Opens a Vulkan backend once with validation on: 0 when one exists, 77 (after printing SKIP) when
 * the machine has no Vulkan loader or device. From then on any message of the validation layer
 * fails the test: as the error status of the backend call during which it came (every status is
 * checked), or, for those no status could carry (a backend's destroy), at parity_check_validation. */
int parity_vulkan_available(void);

/* Records a failure in `counts` when the validation layer reported messages that no status carried
 * (tf_vulkan_validation_unreported), naming the first, and prints the count. Call it last, after
 * every session is destroyed. */
void parity_check_validation(tf_test_counts *counts);

/* Fills every input and label of `plan` with data from `seed`: f32 normal values, i32 values in
 * [0, int_high) with every 7th one replaced by `int_special` when int_special != INT32_MIN. */
typedef struct parity_data {
  uint64_t seed;
  int32_t int_high, int_special;
} parity_data;
tf_status parity_feed(tf_session *session, const tf_plan *plan, const parity_data *data);

/* Compiles `graph` for both targets with `options` (its target is replaced) and creates a session
 * on each; the caller destroys them. */
tf_status parity_open(const tf_graph *graph, const tf_compile_options *options, tf_plan *plans[2],
                      tf_session *sessions[2]);
/* parity_open with each target's own options: options[0] for the cpu, options[1] for vulkan (their
 * targets as given). */
tf_status parity_open_each(const tf_graph *graph, const tf_compile_options options[2], tf_plan *plans[2],
                           tf_session *sessions[2]);
void parity_close(tf_plan *plans[2], tf_session *sessions[2]);

/* Compares buffer `name` between the sessions, folding the result into *result; false (with the
 * failure recorded in counts) when it is out of tolerance or cannot be read. */
bool parity_compare_buffer(tf_test_counts *counts, tf_session *sessions[2], const tf_plan_buffer *buffer,
                           parity_tolerance tolerance, parity_result *result);

#endif
