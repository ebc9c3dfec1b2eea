/* The data feed: reads a plan's inputs and labels from .npy files (memory-mapped) and writes one
 * micro-batch at a time into a session; only micro-batches ever reach the device. What `tightfit
 * train --data DIR` and the Python package's Session.train use.
 *
 * Two layouts. Per sample: a file per input/label, `DIR/<name>.npy`, shaped [S, ...] where each
 * sample matches the buffer's per-sample shape (or element count: [S, 64] feeds [N, 1, 8, 8]);
 * samples are drawn in a fresh seeded permutation every epoch. An input the graph gives no batch
 * axis (tf_plan_buffer.unbatched: a static shape such as [3,4,5]) takes its file whole, exactly its
 * element count, every micro-batch; when no input has a batch axis (or there is no input), the data
 * is one sample. A bf16 input takes float32 data (NumPy has no bfloat16), rounded to nearest even; an
 * inference plan's features may be NaN or Inf (a training plan's must be finite). Token stream: a 1-D integer file
 * `DIR/tokens.npy` feeds [N, T] `tokens` and, shifted by one, `labels` (next-token prediction),
 * from random windows. Ids and class labels are checked against the table/class counts the plan
 * uses them with, so bad data is an error naming the file and index, never a wild read. */
#ifndef TIGHTFIT_FEED_H
#define TIGHTFIT_FEED_H

#include "tightfit/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_feed tf_feed;

/* Opens the files in `dir` for every input and label of the plan; `seed` orders the samples. */
tf_status tf_feed_open(const tf_plan *plan, const char *dir, uint64_t seed, tf_feed **out) TF_MUST_USE;
void tf_feed_close(tf_feed *feed);
/* Writes the next micro-batch into the session. Allocates nothing: open made every buffer it uses
 * (a training step stays off the heap; tests/alloc_probe measures it). */
tf_status tf_feed_next(tf_feed *feed, tf_session *session) TF_MUST_USE;
/* Samples (or windows) in one epoch; the micro-batches `next` has produced so far. */
int64_t tf_feed_samples(const tf_feed *feed);
int64_t tf_feed_position(const tf_feed *feed);
/* Skips ahead to micro-batch `position` (checkpoint resume reproduces the same order). */
void tf_feed_seek(tf_feed *feed, int64_t position);
/* For evaluation: micro-batch `index` in file order (no shuffling; the last batch wraps). Allocates
 * nothing either. */
tf_status tf_feed_batch_in_order(tf_feed *feed, tf_session *session, int64_t index) TF_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
