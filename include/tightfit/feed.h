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
 * uses them with, so bad data is an error naming the file and index, never a wild read.
 *
 * While a micro-batch trains, a background thread reads the next one (prefetch, on by default), so
 * a step waits only for the upload; the batches and their order are the same either way. A file
 * truncated while it is read raises SIGBUS on the reading thread (see tf_feed_set_guard). */
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
/* Writes the next micro-batch into the session, then starts reading the one after it in the
 * background. Allocates nothing: open made every buffer and the thread it uses (a training step
 * stays off the heap; tests/alloc_probe measures it). An error (an id out of range in a file changed
 * since open; under a guard, a file shrunk since open) names the file, whichever thread met it. */
tf_status tf_feed_next(tf_feed *feed, tf_session *session) TF_MUST_USE;
/* Moves the staging of every input of `min_bytes` or more into `session`'s host memory
 * (tf_session_alloc_host: page-locked on CUDA, whose upload then copies from it directly instead of
 * through its own pinned mirror); a source the backend has no memory for keeps its own. Call it
 * once, before the first next; close the feed before destroying the session. Small inputs gain
 * little and a backend has few host buffers (Vulkan: 4): `tightfit train` stages 1 MiB and up. */
tf_status tf_feed_stage_in(tf_feed *feed, tf_session *session, int64_t min_bytes) TF_MUST_USE;
/* How many inputs tf_feed_stage_in moved into the session's host memory. */
int32_t tf_feed_staged_in(const tf_feed *feed);
/* Turns the background reading on (the default after open) or off (each micro-batch read when
 * next takes it, on the calling thread); an error only when no thread can be started. */
tf_status tf_feed_set_prefetch(tf_feed *feed, bool on) TF_MUST_USE;
bool tf_feed_prefetching(const tf_feed *feed);
/* What runs the feed's reads of its memory-mapped files, on whichever thread reads: guard(read,
 * context) calls read(context) and returns its status. A file truncated while it is mapped raises
 * SIGBUS on the reading thread; the library installs no signal handler, so a caller that wants an
 * error instead (the CLI: tools/bus_guard.h) gives a guard that catches the signal on the calling
 * thread and returns an error naming the file. Without one (the default) such a read kills the
 * process, as any read of a truncated mapping does. */
typedef tf_status (*tf_feed_guard)(tf_status (*read)(void *context), void *context);
void tf_feed_set_guard(tf_feed *feed, tf_feed_guard guard);
/* The micro-batches next found already read in the background (the rest were read when taken). */
int64_t tf_feed_prefetched(const tf_feed *feed);
/* The seconds next spent so far handing its batches to the session (tf_session_write: on a GPU the
 * copy into pinned memory and the upload's start), the rest of its time being the reads. */
double tf_feed_upload_seconds(const tf_feed *feed);
/* A data-parallel job of `ranks` processes: each rank takes blocks of the plan's accumulate
 * micro-batches, rank r blocks r, r + ranks, ... (tools/cmd_train.c), and seeks to each; the feed
 * prepares the next of its own rather than the next in order. Call it (and set_guard) before the
 * first next: the background thread reads both. */
void tf_feed_set_ranks(tf_feed *feed, int32_t ranks);
/* Samples (or windows) in one epoch; the micro-batches `next` has produced so far. */
int64_t tf_feed_samples(const tf_feed *feed);
int64_t tf_feed_position(const tf_feed *feed);
/* Skips ahead to micro-batch `position` (checkpoint resume reproduces the same order); what was
 * prepared for another position is discarded when next runs. */
void tf_feed_seek(tf_feed *feed, int64_t position);
/* For evaluation: micro-batch `index` in file order (no shuffling; the last batch wraps). Allocates
 * nothing either. */
tf_status tf_feed_batch_in_order(tf_feed *feed, tf_session *session, int64_t index) TF_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
