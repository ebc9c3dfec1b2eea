/* `tightfit train P.tfplan --data DIR --steps S`: runs a training plan on a backend. One optimizer
 * step = `accumulate` micro-batches + the update. Progress on a terminal, plain lines otherwise;
 * Ctrl-C (and TERM, HUP) finishes the current step and saves a checkpoint when --checkpoint is given.
 * The run holds the checkpoint folder's lock (checkpoint_lock.h), a data file truncated under it
 * ends it with the file named (bus_guard.h), and its weights are scanned once more at the end. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backends/backend.h"
#include "common/checked.h"
#include "runtime/feed.h"
#include "tightfit/runtime.h"
#include "tools/bus_guard.h"
#include "tools/checkpoint_lock.h"
#include "tools/cli.h"
#include "tools/dist.h"
#include "tools/evaluate.h"
#include "tools/finite_check.h"
#include "tools/init_from_cli.h"
#include "tools/train_checks.h"
#include "tools/train_throughput.h"

static volatile sig_atomic_t interrupted = 0;
/* Seconds a stop signal waits for the step to end: three times the longest step so far, at least
 * 30 (stop_grace_after). A step that never ends (a library stuck: OpenBLAS retrying an allocation
 * under `ulimit -v` with several threads) then ends the run instead of hanging it. */
static volatile sig_atomic_t stop_grace = 30;
static volatile sig_atomic_t in_steps = 0; /* the grace covers the steps only, never a save */

/* "device memory: ..." as the backend measured it (on the CPU backend: its regions as allocated). */
static void print_device_memory(const tf_session *session) {
  tf_device_memory d;
  tf_status status = tf_session_device_memory(session, &d);
  if (status) {
    tf_status_free(status);
    return;
  }
  char regions[32], measured[32], overhead[32], context[32];
  fprintf(tf_cli_out(), "device memory: regions %s (the device counts %s), backend overhead %s",
          tf_cli_bytes(d.region_bytes, regions, sizeof(regions)),
          d.region_device_bytes >= 0 ? tf_cli_bytes(d.region_device_bytes, measured, sizeof(measured)) : "?",
          d.overhead_bytes >= 0 ? tf_cli_bytes(d.overhead_bytes, overhead, sizeof(overhead)) : "?");
  if (d.context_bytes >= 0)
    fprintf(tf_cli_out(), ", driver context %s", tf_cli_bytes(d.context_bytes, context, sizeof(context)));
  fprintf(tf_cli_out(), "\n");
}

static void on_interrupt(int signal_number) {
  /* A hangup (a closed terminal or ssh session) usually takes the reader of a piped stdout with it
   * (`train | tee log`): a write to it must fail, not kill the run before it saves. */
  if (signal_number == SIGHUP)
    signal(SIGPIPE, SIG_IGN);
  /* A second signal ends the process at once: the first waits for the step, which a library can
   * hold forever (issue 49: OpenBLAS retrying an allocation under `ulimit -v`). */
  if (interrupted) {
    signal(signal_number, SIG_DFL);
    raise(signal_number);
  }
  interrupted = 1;
  if (in_steps)
    alarm((unsigned)stop_grace);
}

/* The step did not end within the grace: nothing can be saved from inside it, and the last
 * checkpoint (written whole, then renamed) is intact. Only async-signal-safe calls here. */
static void on_stuck_step(int signal_number) {
  (void)signal_number;
  static const char message[] = "tightfit train: the step did not end within the grace after the stop signal "
                                "(three times the longest step, at least 30 s): exiting without saving; the "
                                "last checkpoint is intact\n";
  ssize_t written = write(STDERR_FILENO, message, sizeof(message) - 1);
  (void)written;
  _exit(1);
}

/* Grows the grace to three times `step_seconds` when that is longer (at most an hour). */
static void stop_grace_after(double step_seconds) {
  const double grace = 3 * step_seconds + 1;
  if (grace > stop_grace)
    stop_grace = grace > 3600 ? 3600 : (sig_atomic_t)grace;
}

typedef struct train_args {
  const char *plan_path, *data, *eval, *checkpoint, *backend, *weights_dir, *init_from, *init_map;
  const char *resume_dir; /* --resume: --checkpoint's folder, also on a job's ranks > 0 (which neither lock nor save) */
  int64_t steps, log_every, checkpoint_every;
  double checkpoint_minutes;  /* --checkpoint-every-minutes; 0: no time-based saving */
  int64_t loss_scale_window;  /* fp16: good steps before the loss scale doubles; 0: the runtime's 2000 */
  int64_t check_finite_steps; /* --check-finite: the first steps whose gradients are scanned; -1: all */
  bool check_finite;          /* false: --check-finite off */
  int32_t threads, device;
  char backend_name[32];
  uint64_t seed;
  bool resume, json;
  bool prefetch; /* false: --no-prefetch */
} train_args;

static void help(void) {
  fprintf(tf_cli_out(),
          "usage: tightfit train P.tfplan --data DIR --steps S [options]\n\n"
          "Trains with a compiled plan. DIR holds one .npy per input and label of the plan, named after\n"
          "it (x.npy, labels.npy), with samples along the first axis; or a 1-D tokens.npy stream for\n"
          "[N, T] token models (labels are the next tokens).\n\n"
          "options:\n"
          "  --steps S              the optimizer steps to reach (required): S steps, or with --resume\n"
          "                         from the checkpoint's step up to S (already there: nothing to train)\n"
          "  --data DIR             training data (required)\n"
          "  --eval DIR             held-out data: loss and accuracy after training (progress on\n"
          "                         stderr: every 2 s on a terminal, else every 100 batches)\n"
          "  --checkpoint DIR       save DIR/latest.safetensors at the end, every --checkpoint-every\n"
          "                         steps, every --checkpoint-every-minutes and on Ctrl-C (INT, TERM\n"
          "                         or HUP). One run per folder: a second train on a folder in use is\n"
          "                         refused (DIR/train.lock, released when the run exits). A stop\n"
          "                         signal waits for the step to end, at most three times the longest\n"
          "                         step (30 s at least), then exits without saving; a second one at once\n"
          "  --checkpoint-every M   (default: only at the end)\n"
          "  --checkpoint-every-minutes M\n"
          "                         also save when M minutes of wall time (a decimal, e.g. 0.5) have\n"
          "                         passed since the last save (default: off)\n"
          "  --resume               continue from DIR/latest.safetensors\n"
          "  --weights-dir D        where the graph's safetensors files (`import`'s weights) are (default:\n"
          "                         the plan's folder, then the graph's folder when the plan was compiled)\n"
          "  --init-from F          start from the pretrained weights in safetensors file F: every\n"
          "                         parameter from the file by name, each mismatch named (docs/finetune.md)\n"
          "  --init-map M           how F's names and layouts differ from the plan's: a map file, or\n"
          "                         hf-gpt2 (a Hugging Face GPT-2 checkpoint into the zoo's gpt presets)\n"
          "  --seed N               initialisation, data order and dropout (default 0)\n"
          "  --threads N            CPU threads (default 2)\n"
          "  --device D             cpu (default), vulkan:N or cuda:N (see `tightfit devices`)\n"
          "  --log-every M          a line every M steps when not on a terminal (default 10)\n"
          "  --check-finite K       scan the gradients for NaN/Inf before the optimizer step of the first\n"
          "                         K steps (default 10; 'all' for every step), and the weights before\n"
          "                         each checkpoint; 'off' turns both off. The loss is checked at every\n"
          "                         step, and loaded checkpoints always. A non-finite value stops the run\n"
          "                         before any weight or checkpoint is overwritten. A plan compiled with\n"
          "                         --update-in-backward keeps no gradient past its update: its weights\n"
          "                         are scanned after each of those steps instead, and a non-finite one\n"
          "                         stops the run before any checkpoint is overwritten. Whatever K,\n"
          "                         the weights are scanned at the end of every run: non-finite ones\n"
          "                         fail the run (exit 2) with the tensor named, checkpoint or not.\n"
          "  --loss-scale-window N  fp16 plans: double the loss scale after N steps in a row without\n"
          "                         overflow (default 2000). A step whose gradients are not finite is\n"
          "                         skipped (weights and optimizer state unchanged) and halves the\n"
          "                         scale; the log says so. A skip at scale 1 stops the run. Plans that\n"
          "                         clip skip such a step too, and stop.\n"
          "  --no-prefetch          read each micro-batch when its step needs it (default: the next one\n"
          "                         is read on a background thread while a step runs; same batches)\n"
          "  --json                 one JSON object per logged step, and a summary\n\n"
          "exit codes: 0 done, 1 interrupted (checkpoint saved when asked), 2 bad usage or input\n"
          "(a data file truncated while train reads it, non-finite weights at the end too).\n");
}

/* A count in [min, 2^53] (step counters stay exact as doubles, and a checkpoint's step plus --steps
 * cannot overflow); never saturates ("99999999999999999999" is refused). */
static bool parse_count(const char *text, int64_t *value, int64_t min) {
  return tf_parse_i64(text, min, TF_CHECKED_EXACT_DOUBLE_MAX, value) == TF_PARSE_OK;
}

/* Minutes of wall time: a finite decimal in (0, 10^6]. */
static bool parse_minutes(const char *text, double *minutes) {
  char *end;
  errno = 0;
  *minutes = strtod(text, &end);
  return end != text && *end == '\0' && errno == 0 && isfinite(*minutes) && *minutes > 0 && *minutes <= 1e6;
}

static int parse_args(int argc, char **argv, train_args *a) {
  memset(a, 0, sizeof(*a));
  a->backend = "cpu";
  a->log_every = 10;
  a->check_finite = true;
  a->check_finite_steps = 10;
  a->threads = 2;
  a->prefetch = true;
  tf_cli_args walk = tf_cli_args_start("train", argc, argv, help, &a->json);
  while (tf_cli_args_next(&walk)) {
    const char *v;
    int64_t n;
    if (strcmp(argv[walk.i], "--resume") == 0) {
      a->resume = true;
    } else if (strcmp(argv[walk.i], "--no-prefetch") == 0) {
      a->prefetch = false;
    } else if (tf_cli_args_option(&walk, "--data", &v)) {
      a->data = v;
    } else if (tf_cli_args_option(&walk, "--eval", &v)) {
      a->eval = v;
    } else if (tf_cli_args_option(&walk, "--init-from", &v)) {
      a->init_from = v;
    } else if (tf_cli_args_option(&walk, "--init-map", &v)) {
      a->init_map = v;
    } else if (tf_cli_args_option(&walk, "--weights-dir", &v)) {
      a->weights_dir = v;
    } else if (tf_cli_args_option(&walk, "--checkpoint", &v)) {
      a->checkpoint = v;
    } else if (tf_cli_args_option(&walk, "--backend", &v) || tf_cli_args_option(&walk, "--device", &v)) {
      if (!walk.error && !tf_backend_parse_device(v, a->backend_name, sizeof(a->backend_name), &a->device))
        return tf_cli_usage_error("train", "--device takes cpu, vulkan:N or cuda:N, got '%s'", v);
      a->backend = a->backend_name;
    } else if (tf_cli_args_option(&walk, "--steps", &v)) {
      if (!walk.error && !parse_count(v, &a->steps, 1))
        return tf_cli_usage_error("train", "--steps takes a count in 1..2^53, got '%s'", v);
    } else if (tf_cli_args_option(&walk, "--loss-scale-window", &v)) {
      if (!walk.error && !parse_count(v, &a->loss_scale_window, 1))
        return tf_cli_usage_error("train", "--loss-scale-window takes a count >= 1, got '%s'", v);
    } else if (tf_cli_args_option(&walk, "--log-every", &v)) {
      if (!walk.error && !parse_count(v, &a->log_every, 1))
        return tf_cli_usage_error("train", "--log-every takes a count >= 1, got '%s'", v);
    } else if (tf_cli_args_option(&walk, "--check-finite", &v)) {
      a->check_finite = walk.error || strcmp(v, "off") != 0;
      if (!walk.error && strcmp(v, "all") == 0)
        a->check_finite_steps = -1;
      else if (!walk.error && a->check_finite && !parse_count(v, &a->check_finite_steps, 0))
        return tf_cli_usage_error("train", "--check-finite takes a step count, 'all' or 'off', got '%s'", v);
    } else if (tf_cli_args_option(&walk, "--checkpoint-every-minutes", &v)) {
      if (!walk.error && !parse_minutes(v, &a->checkpoint_minutes))
        return tf_cli_usage_error("train", "--checkpoint-every-minutes takes a number of minutes > 0, got '%s'", v);
    } else if (tf_cli_args_option(&walk, "--checkpoint-every", &v)) {
      if (!walk.error && !parse_count(v, &a->checkpoint_every, 1))
        return tf_cli_usage_error("train", "--checkpoint-every takes a count >= 1, got '%s'", v);
    } else if (tf_cli_args_option(&walk, "--threads", &v)) {
      if (!walk.error && (!parse_count(v, &n, 1) || n > 1024))
        return tf_cli_usage_error("train", "--threads takes 1..1024, got '%s'", v);
      a->threads = (int32_t)n;
    } else if (tf_cli_args_option(&walk, "--seed", &v)) {
      if (!walk.error && !parse_count(v, &n, 0))
        return tf_cli_usage_error("train", "--seed takes a number >= 0, got '%s'", v);
      a->seed = (uint64_t)n;
    } else {
      tf_cli_args_positional(&walk, "plan", &a->plan_path);
    }
  }
  if (!tf_cli_args_done(&walk, a->plan_path != NULL, "missing the plan file") ||
      !tf_cli_args_done(&walk, a->data != NULL, "missing --data DIR") ||
      !tf_cli_args_done(&walk, a->steps != 0, "missing --steps S"))
    return walk.exit_code == TF_EXIT_OK ? -1 : walk.exit_code;
  if (a->resume && !a->checkpoint)
    return tf_cli_usage_error("train", "--resume needs --checkpoint DIR");
  if (a->init_map && !a->init_from)
    return tf_cli_usage_error("train", "--init-map needs --init-from FILE");
  if (a->init_from && a->resume)
    return tf_cli_usage_error("train", "--init-from starts a run from pretrained weights and --resume continues "
                                       "one from its checkpoint: give one of them");
  if (a->checkpoint_minutes > 0 && !a->checkpoint)
    return tf_cli_usage_error("train", "--checkpoint-every-minutes needs --checkpoint DIR");
  return 0;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Saves DIR/latest.safetensors, after checking (unless --check-finite off) that the weights are
 * finite: a NaN checkpoint never replaces a good one. A job's (`ranks` > 1) counts the micro-batches
 * of every rank (train() keeps the job's counters), so it says the job's accumulation, ranks x k: one
 * process with --accumulate ranks x k, or a job of other ranks, resumes it where it stopped. */
static tf_status save_checkpoint(tf_session *session, const char *dir, bool check_finite, int ranks) {
  if (check_finite) {
    char when[96];
    snprintf(when, sizeof(when), "after step %" PRId64, tf_session_optimizer_steps(session));
    TF_RETURN_IF_ERROR(tf_tool_check_finite(session, TF_TOOL_WEIGHTS, when,
                                            "no checkpoint written (the last one, if any, is left as it was)"));
  }
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    return tf_status_new(TF_ERR_IO, "%s: cannot create the checkpoint folder: %s", dir, strerror(errno));
  char path[4096];
  snprintf(path, sizeof(path), "%s/latest.safetensors", dir);
  char accumulate[64];
  const char *job[1] = {accumulate};
  snprintf(accumulate, sizeof(accumulate), "tightfit.accumulate=%lld",
           (long long)tf_session_plan(session)->accumulate * ranks);
  return tf_session_save(session, path, ranks > 1 ? job : NULL, ranks > 1 ? 1 : 0);
}

static void progress(const train_args *a, bool tty, const tf_session *session, int64_t step, int64_t total, double loss,
                     double rate, double eta) {
  if (a->json) {
    const tf_session_scaling c = tf_session_scaling_state(session);
    char scaling[96] = "";
    if (c.scaled)
      snprintf(scaling, sizeof(scaling), ", \"loss_scale\": %.0f, \"skipped\": %s", ldexp(1.0, c.previous_log2),
               c.last_skipped ? "true" : "false");
    fprintf(tf_cli_out(), "{\"step\": %" PRId64 ", \"loss\": %.9g, \"samples_per_second\": %.1f%s}\n", step, loss, rate,
            scaling);
    fflush(tf_cli_out());
  } else if (tty) {
    int width = 24, filled = (int)((double)width * (double)step / (double)total);
    char bar[32];
    for (int i = 0; i < width; i++)
      bar[i] = i < filled ? '=' : ' ';
    bar[width] = '\0';
    fprintf(tf_cli_err(), "\rstep %6" PRId64 "/%" PRId64 " [%s] loss %8.4f  %8.1f samples/s  ETA %3d:%02d ", step,
            total, bar, loss, rate, (int)(eta / 60), (int)fmod(eta, 60));
    fflush(tf_cli_err());
  } else if (step % a->log_every == 0 || step == total) {
    fprintf(tf_cli_out(), "step %" PRId64 "/%" PRId64 "  loss %.4f  %.1f samples/s\n", step, total, loss, rate);
    fflush(tf_cli_out());
  }
}

/* What a run holds, released by release() however it ended: a bus error's jump (train_guarded)
 * leaves train() halfway, so these live in the caller's frame, not in train()'s locals. */
typedef struct train_run {
  tf_session *session;
  tf_feed *feed;
  int lock_fd;
  tf_dist *dist; /* a data-parallel job's ranks (tools/dist.h); inactive for one process */
  /* a job that checkpoints (rank 0 writes): under ZeRO every other rank sends its shard at each save */
  bool job_checkpoints;
} train_run;

static void release(train_run *run) {
  tf_feed_close(run->feed);
  tf_session_destroy(run->session);
  tf_tool_checkpoint_unlock(run->lock_fd);
  run->feed = NULL;
  run->session = NULL;
  run->lock_fd = -1;
}

/* A failure: said (naming the rank in a job), and in a job the end of every rank (tf_dist_abort), so
 * that none waits for this one in a sum. */
static int fail_rank(const tf_dist *dist, tf_status status) {
  if (dist->active)
    status = tf_status_prefix(status, "rank %d of %d", dist->rank, dist->size);
  const int code = tf_cli_fail("train", status);
  fflush(tf_cli_out());
  tf_dist_abort(dist, code, tf_cli_err());
  return code;
}

static int train(const train_args *a, tf_plan *plan, train_run *run) {
  tf_session_options options = tf_session_options_default();
  options.backend = a->backend;
  options.device = a->device;
  options.threads = a->threads;
  options.seed = a->seed;
  options.loss_scale_growth_interval = a->loss_scale_window;
  options.rank = run->dist->active ? run->dist->rank : 0; /* under ZeRO, the shard it holds */
  char folder[4096];
  options.weights_dir = a->weights_dir ? a->weights_dir : tf_cli_folder_of(a->plan_path, folder, sizeof(folder));
  /* The lock first: a second run on the folder is refused before it loads anything. */
  tf_status status = a->checkpoint ? tf_tool_checkpoint_lock(a->checkpoint, &run->lock_fd) : NULL;
  if (!status)
    status = tf_session_create(plan, &options, &run->session);
  tf_session *session = run->session;
  if (!status && run->dist->active && plan->zero > 0 && run->dist->rank == 0) /* its checkpoints gather the shards */
    tf_session_set_remote_read(session, tf_dist_receive_shard, run->dist);
  run->dist->threads = a->threads; /* whether a thread reducing stage 2's buckets has a core of its own */
  if (!status)                     /* ZeRO stage 2: the gradient buckets reduced in the backward pass */
    status = tf_dist_reduce_buckets(run->dist, session);
  if (!status && !a->resume) /* NaN in imported weights: the file's fault, not the learning rate's */
    status = tf_tool_check_initial_weights(session, options.weights_dir, "refusing to train from non-finite weights");
  if (!status && a->init_from)
    status = tf_tool_init_from(session, a->init_from, a->init_map, tf_cli_err());
  if (!status)
    status = tf_feed_open(plan, a->data, a->seed, &run->feed);
  tf_feed *feed = run->feed;
  if (!status) /* a data file truncated under the feed's reads: an error naming it, on either thread */
    tf_feed_set_guard(feed, tf_tool_bus_guarded);
  if (!status && !a->prefetch)
    status = tf_feed_set_prefetch(feed, false);
  if (!status && run->dist->active) /* each rank prepares its own next micro-batch */
    tf_feed_set_ranks(feed, run->dist->size);
  /* large inputs staged in the device's host memory: CUDA uploads them without a copy (off with
   * TIGHTFIT_FEED_STAGE_IN=0, the path before, for comparison) */
  const char *stage_in = getenv("TIGHTFIT_FEED_STAGE_IN");
  if (!status && !(stage_in && strcmp(stage_in, "0") == 0))
    status = tf_feed_stage_in(feed, session, (int64_t)1 << 20);
  if (!status && a->resume) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/latest.safetensors", a->resume_dir);
    status = tf_session_load(session, path);
    if (!status)
      status = tf_tool_check_finite(session, TF_TOOL_WEIGHTS, path, "refusing to resume from non-finite weights");
    if (!status) {
      tf_feed_seek(feed, tf_session_micro_steps(session));
      if (run->dist->rank == 0) /* a job's ranks all load it; one says so */
        fprintf(tf_cli_err(), "resumed from %s at step %" PRId64 "\n", path, tf_session_optimizer_steps(session));
    }
  }
  if (!status && tf_session_optimizer_steps(session) >= a->steps) { /* --steps is the total to reach */
    fprintf(tf_cli_err(),
            "tightfit train: the checkpoint is at step %" PRId64 ", at or past --steps %" PRId64
            " (the step to reach): nothing to train\n",
            tf_session_optimizer_steps(session), a->steps);
    release(run);
    return TF_EXIT_OK;
  }
  bool tty = isatty(fileno(tf_cli_err())) && !a->json;
  /* stdio allocates stdout's buffer at its first write, which would be the first progress line,
   * inside a step; setvbuf allocates it now. Fully buffered is safe: progress() flushes each line. */
  setvbuf(tf_cli_out(), NULL, _IOFBF, BUFSIZ);
  signal(SIGINT, on_interrupt);
  signal(SIGTERM, on_interrupt);
  signal(SIGHUP, on_interrupt); /* save as for TERM */
  signal(SIGALRM, on_stuck_step);
  double start = now(), loss = NAN, last_save = start, feed_seconds = 0, steps_seconds = 0;
  int64_t first = session ? tf_session_optimizer_steps(session) : 0, done = 0;
  const bool updates_in_backward = tf_plan_updates_in_backward(plan);
  const tf_dist *dist = run->dist;
  bool stop = false; /* a job's stop signal, any rank's, agreed on after each step (tf_dist_step_end) */
  in_steps = 1;
  for (int64_t step = first; !status && step < a->steps && !(dist->active ? stop : interrupted); step++) {
    double sum = 0, step_start = now() - start;
    const int64_t taken = tf_session_micro_steps(session); /* by every rank of a job, before this step */
    for (int32_t m = 0; m < plan->accumulate && !status; m++) {
      double micro_loss;
      /* A rank's micro-batches: its own k of the R x k of the step, as one process with --accumulate
       * R x k takes them; its counter the same as there (dropout draws by it). */
      if (dist->active) {
        const int64_t position = taken + (int64_t)dist->rank * plan->accumulate + m;
        tf_feed_seek(feed, position);
        tf_session_set_counters(session, tf_session_optimizer_steps(session), position);
      }
      const double feed_start = now();
      status = tf_feed_next(feed, session);
      feed_seconds += now() - feed_start;
      if (!status)
        status = tf_session_micro_step(session, &micro_loss);
      if (!status && !isfinite(micro_loss))
        status = tf_tool_train_nonfinite_loss(step, m, plan->accumulate, micro_loss, updates_in_backward);
      sum += micro_loss;
    }
    if (!status && dist->active) /* the job's micro-batches so far, as the checkpoint counts them */
      tf_session_set_counters(session, tf_session_optimizer_steps(session),
                              taken + (int64_t)dist->size * plan->accumulate);
    if (!status)
      status = tf_dist_sum_gradients(run->dist, session);
    /* A plan that scales its loss checks every step's gradients itself and skips the update. */
    const bool scan = a->check_finite && plan->loss_scale_seed < 0 &&
                      (a->check_finite_steps < 0 || step - first < a->check_finite_steps);
    if (!status && scan && !updates_in_backward)
      status = tf_tool_train_check_gradients(session, step);
    if (!status)
      status = tf_session_optimizer_step(session);
    if (!status) /* ZeRO: the parameters from the ranks that updated them */
      status = tf_dist_share_updates(run->dist, session);
    if (!status && scan && updates_in_backward)
      status = tf_tool_train_check_updated_weights(session, step);
    if (!status)
      status = tf_tool_train_follow_scaling(session, step, a->json, tty, a->loss_scale_window);
    if (status)
      break;
    loss = tf_dist_step_end(dist, sum / plan->accumulate, interrupted, &stop); /* the ranks' mean */
    done++;
    double elapsed = now() - start;
    steps_seconds += elapsed - step_start; /* the steps' own time: no checkpoint saves */
    stop_grace_after(elapsed - step_start);
    double rate = (double)(done * plan->global_batch) / (elapsed > 0 ? elapsed : 1e-9);
    double eta = elapsed / (double)done * (double)(a->steps - step - 1);
    progress(a, tty, session, step + 1, a->steps, loss, rate, eta);
    const bool every_steps = a->checkpoint_every && (step + 1) % a->checkpoint_every == 0;
    const bool every_minutes = a->checkpoint_minutes > 0 && start + elapsed - last_save >= 60 * a->checkpoint_minutes;
    if (a->checkpoint && (every_steps || every_minutes)) {
      in_steps = 0;
      status = save_checkpoint(session, a->checkpoint, a->check_finite, run->dist->size);
      last_save = now();
      in_steps = 1;
    } else if (run->job_checkpoints && every_steps) {
      status = tf_dist_send_shard(run->dist, session); /* rank 0 is saving: its shard from this rank */
    }
  }
  in_steps = 0;
  alarm(0); /* the loop saw the signal: the saves below take what they take */
  if (stop)
    interrupted = 1; /* another rank's signal ends this one too */
  if (tty)
    fprintf(tf_cli_err(), "\n");
  if (!status && session)
    status = tf_tool_train_check_final_weights(session, a->checkpoint != NULL);
  if (!status && a->checkpoint)
    status = save_checkpoint(session, a->checkpoint, false, run->dist->size); /* just scanned */
  else if (!status && run->job_checkpoints)
    status = tf_dist_send_shard(run->dist, session);
  double eval_loss = NAN, accuracy = NAN;
  if (!status && a->eval && !interrupted)
    status =
        tf_tool_evaluate(session, a->eval, a->seed, NULL, "held-out", TF_TOOL_PROGRESS_EVERY, &eval_loss, &accuracy);
  if (!status) {
    tf_session_memory m = tf_session_memory_use(session);
    const tf_session_scaling c = tf_session_scaling_state(session);
    char planned[32], allocated[32];
    if (a->json) {
      char eval_text[2][32]; /* null where there is no number (no --eval, no logits to score) */
      const double evals[2] = {eval_loss, accuracy};
      for (int i = 0; i < 2; i++) {
        if (isfinite(evals[i]))
          snprintf(eval_text[i], sizeof(eval_text[i]), "%.6f", evals[i]);
        else
          snprintf(eval_text[i], sizeof(eval_text[i]), "null");
      }
      char scaling[96] = "";
      if (c.scaled)
        snprintf(scaling, sizeof(scaling), ", \"loss_scale\": %.0f, \"skipped_steps\": %" PRId64,
                 ldexp(1.0, c.loss_scale_log2), c.skipped_steps);
      char throughput[192];
      tf_tool_train_throughput_json(throughput, sizeof(throughput), plan, done, steps_seconds, feed_seconds,
                                    tf_feed_upload_seconds(feed));
      fprintf(tf_cli_out(),
              "{\"steps\": %" PRId64 ", \"optimizer_steps\": %" PRId64
              ", \"final_loss\": %.6f, \"eval_loss\": %s, \"eval_accuracy\": %s, "
              "\"planned_bytes\": %" PRId64 ", \"allocated_bytes\": %" PRId64 ", \"allocations_after_create\": %" PRId64
              "%s%s}\n",
              done, first + done, loss, eval_text[0], eval_text[1], m.planned_bytes, m.allocated_bytes,
              m.allocations_after_create, scaling, throughput);
    } else {
      char resumed[96] = ""; /* where a resumed run started and ended */
      if (first > 0)
        snprintf(resumed, sizeof(resumed), " (from step %" PRId64 " to %" PRId64 " of --steps %" PRId64 ")", first,
                 first + done, a->steps);
      fprintf(tf_cli_out(), "trained %" PRId64 " steps in %.2f s%s; final loss %.4f\n", done, now() - start, resumed,
              loss);
      if (c.scaled)
        fprintf(tf_cli_out(), "loss scale %.0f; %" PRId64 " step%s skipped in all (gradients not finite)\n",
                ldexp(1.0, c.loss_scale_log2), c.skipped_steps, c.skipped_steps == 1 ? "" : "s");
      if (a->eval && interrupted)
        fprintf(tf_cli_out(), "held-out: not evaluated (interrupted)\n");
      else if (a->eval && isnan(accuracy))
        fprintf(tf_cli_out(),
                "held-out: loss %.4f (no accuracy: the plan has no logits to read, e.g. a fused loss head)\n",
                eval_loss);
      else if (a->eval)
        fprintf(tf_cli_out(), "held-out: loss %.4f, accuracy %.2f%%\n", eval_loss, 100 * accuracy);
      fprintf(tf_cli_out(), "memory: planned %s, allocated %s in %" PRId64 " allocations, %" PRId64 " after create\n",
              tf_cli_bytes(m.planned_bytes, planned, sizeof(planned)),
              tf_cli_bytes(m.allocated_bytes, allocated, sizeof(allocated)), m.allocations, m.allocations_after_create);
      print_device_memory(session);
      tf_tool_train_print_throughput(tf_cli_out(), plan, done, steps_seconds, feed_seconds,
                                     tf_feed_upload_seconds(feed));
      if (plan->n_host_steps > 0) {
        char host[32], moved[32];
        const int32_t on_device = tf_session_host_steps_on_device(session);
        fprintf(tf_cli_out(), "host memory: %s of %s, %d steps run on the host",
                tf_cli_bytes(plan->host_bytes, host, sizeof(host)), tf_plan_host_contents(plan),
                plan->n_host_steps - on_device);
        if (on_device > 0)
          fprintf(tf_cli_out(), ", %d copies by the device among its steps", on_device);
        fprintf(tf_cli_out(), "; %s moved per step\n",
                tf_cli_bytes(tf_plan_host_moved_bytes(plan), moved, sizeof(moved)));
      }
      if (a->checkpoint)
        fprintf(tf_cli_out(), "checkpoint: %s/latest.safetensors\n", a->checkpoint);
    }
    fflush(tf_cli_out()); /* fully buffered (see setvbuf above): before any message on stderr */
  }
  release(run);
  if (status)
    return fail_rank(run->dist, status);
  if (interrupted) {
    fprintf(tf_cli_err(), "interrupted after %" PRId64 " steps%s\n", done, a->checkpoint ? "; checkpoint saved" : "");
    return TF_EXIT_FAILED;
  }
  return TF_EXIT_OK;
}

/* train() under the bus guard: a data file truncated while it is read ends the run with the file
 * named and exit 2 (bus_guard.h). `run` is the caller's, so what it holds is released after the jump. */
static int train_guarded(const train_args *a, tf_plan *plan, train_run *run) {
  sigjmp_buf jump;
  if (sigsetjmp(jump, 1)) {
    tf_status status = tf_tool_bus_error();
    tf_tool_bus_guard_disarm();
    release(run);
    fflush(tf_cli_out());
    return fail_rank(run->dist, status);
  }
  tf_tool_bus_guard_arm(&jump);
  int code = train(a, plan, run);
  tf_tool_bus_guard_disarm();
  return code;
}

/* A refusal at the start of a job: one that every rank meets alike (tf_dist_start) rank 0 says and
 * all end together; a failure of this rank's alone ends every rank (fail_rank). */
static int refuse_start(tf_dist *dist, tf_plan *plan, tf_status status) {
  int code = TF_EXIT_USAGE;
  if (!dist->active || dist->failed_alone)
    code = fail_rank(dist, status);
  else if (dist->rank == 0)
    code = tf_cli_fail("train", status);
  else
    tf_status_free(status);
  tf_dist_finish(dist);
  tf_plan_destroy(plan);
  return code;
}

int tf_cmd_train(int argc, char **argv) {
  train_args a;
  int parsed = parse_args(argc, argv, &a);
  if (parsed)
    return parsed < 0 ? TF_EXIT_OK : parsed;
  a.resume_dir = a.resume ? a.checkpoint : NULL;
  /* A job's ranks join first, so that any rank's failure from here on ends them all. */
  tf_dist dist;
  tf_status status = tf_dist_join(&dist);
  if (status)
    return tf_cli_fail("train", status);
  tf_plan *plan = NULL;
  status = tf_plan_load(a.plan_path, &plan);
  if (!status && !plan->training)
    status = tf_status_new(TF_ERR_INVALID_INPUT, "%s is an inference plan: compile without --inference to train",
                           a.plan_path);
  if (status) {
    dist.failed_alone = true;
    return refuse_start(&dist, plan, status);
  }
  if (plan->zero > 0 && a.checkpoint_minutes > 0) /* every rank alike: the plan and the options agree */
    return refuse_start(&dist, plan,
                        tf_status_new(TF_ERR_UNSUPPORTED,
                                      "--checkpoint-every-minutes with a ZeRO plan (--zero %d): its ranks send their "
                                      "shards to rank 0 at each save, so they save at the same steps (give "
                                      "--checkpoint-every N)",
                                      plan->zero));
  const tf_dist_job job = {.plan_path = a.plan_path,
                           .data = a.data,
                           .checkpoint = a.checkpoint,
                           .init_from = a.init_from,
                           .init_map = a.init_map,
                           .weights_dir = a.weights_dir,
                           .steps = a.steps,
                           .loss_scale_window = a.loss_scale_window,
                           .seed = a.seed,
                           .resume = a.resume};
  status = tf_dist_start(plan, &job, &dist);
  if (status)
    return refuse_start(&dist, plan, status);
  /* Rank 0 speaks and writes the checkpoints; the others train quietly (their weights are the same)
   * and, resuming, read rank 0's checkpoint without its lock. */
  const bool job_checkpoints = a.checkpoint != NULL;
  FILE *quiet = dist.active && dist.rank > 0 ? fopen("/dev/null", "w") : NULL;
  FILE *outer = tf_cli_out();
  if (quiet) {
    tf_cli_set_streams(quiet, tf_cli_err());
    a.checkpoint = NULL;
  }
  train_run run = {.session = NULL, .feed = NULL, .lock_fd = -1, .dist = &dist, .job_checkpoints = job_checkpoints};
  int code = train_guarded(&a, plan, &run);
  if (quiet) {
    tf_cli_set_streams(outer, tf_cli_err());
    fclose(quiet);
  }
  tf_dist_finish(&dist);
  tf_plan_destroy(plan);
  return code;
}
