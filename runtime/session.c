/* A session: one plan on one backend. Create verifies nothing more (the plan was verified on load
 * or compile), allocates each region once, initialises parameters and constants, and prepares the
 * backend; afterwards steps run with no device allocation at all. Regions are allocated through
 * counted_alloc(), the only caller of the backend's allocator.
 *
 * The memory figures are the backend's own: the bytes come from what its allocation calls counted
 * (tf_backend_vtable.memory, which every backend in the tree has), not from the plan, and a change
 * in what the backend holds after create counts as an allocation after create. Tests do not rest
 * on these figures alone: tests/alloc_probe counts every heap allocation of the process from
 * outside the library, which on the CPU backend and on lavapipe includes the device's. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "core/half_bits.h"
#include "runtime/host_steps.h"
#include "runtime/init.h"
#include "runtime/poison.h"
#include "runtime/safetensors.h"
#include "runtime/session_backend.h"
#include "runtime/session_scratch.h"
#include "runtime/weights_path.h"
#include "tightfit/runtime.h"

struct tf_session {
  const tf_plan *plan;
  const tf_backend_vtable *backend;
  void *state;
  void *regions[TF_REGION_COUNT];
  tf_session_memory memory;         /* planned bytes and the session's alloc_region calls */
  int64_t asked_bytes;              /* bytes those calls asked for: the figure when the backend measures none */
  tf_device_memory created_measure; /* the backend's measure when create returned */
  bool created;
  uint64_t seed;
  int64_t optimizer_steps, micro_steps;
  int32_t io_slot;     /* the half the next micro-step reads */
  bool *written;       /* per plan buffer: an io input or label written since a micro-step last read it */
  int32_t *fed, n_fed; /* the io inputs and labels (the primary of each twin pair), found at create */
  int32_t forward_end; /* steps [0, forward_end) are the forward phase */
  tf_session_scaling scaling;
  int64_t growth_interval; /* f16: good steps after which the loss scale doubles */
  void *scratch;           /* runtime/session_scratch.h */
  int64_t scratch_bytes;
  tf_host_steps host;                 /* an offloaded plan's host region and updates (runtime/host_steps.h) */
  int32_t host_threads;               /* the threads its updates may use (the session's option) */
  int32_t rank;                       /* a data-parallel job's rank: a ZeRO plan's shard it holds */
  tf_session_remote_read remote_read; /* the shards of other ranks, where given */
  void *remote_context;
  int32_t *pauses; /* steps of the micro-batch block after which `pause` runs (tf_session_set_pauses) */
  int32_t n_pauses;
  tf_session_pause pause;
  void *pause_context;
};

bool tf_session_holds(const tf_session *s, int32_t buffer) {
  const int32_t held = s->plan->buffers[buffer].held_by;
  return held == 0 || held == s->rank + 1;
}

void tf_session_set_remote_read(tf_session *s, tf_session_remote_read read, void *context) {
  s->remote_read = read;
  s->remote_context = context;
}

tf_status tf_session_set_pauses(tf_session *s, const int32_t *after, int32_t n, tf_session_pause pause, void *context) {
  for (int32_t i = 0; i < n; i++)
    if (after[i] < 0 || after[i] >= s->plan->micro_steps || (i > 0 && after[i] <= after[i - 1]))
      return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                           "pause %" PRId32 " after step %" PRId32 ": pauses are ascending steps of the micro-batch "
                           "block [0, %" PRId32 ")",
                           i, after[i], s->plan->micro_steps);
  int32_t *copy = n > 0 ? malloc(sizeof(int32_t) * (size_t)n) : NULL;
  if (n > 0 && !copy)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory for %" PRId32 " pauses", n);
  if (n > 0)
    memcpy(copy, after, sizeof(int32_t) * (size_t)n);
  free(s->pauses);
  s->pauses = copy;
  s->n_pauses = n;
  s->pause = pause;
  s->pause_context = context;
  return NULL;
}

/* A buffer another rank holds (ZeRO): why this session cannot touch it. */
static tf_status not_held(const tf_session *s, const tf_plan_buffer *b) {
  if (b->held_by < 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "buffer '%s' is held in pieces across the ranks (ZeRO stage %d); this session (rank %d) "
                         "writes its own pieces",
                         b->name, s->plan->zero, s->rank);
  return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                       "buffer '%s' is rank %d's shard of the optimizer state (ZeRO stage %d); this session is rank "
                       "%d's",
                       b->name, b->held_by - 1, s->plan->zero, s->rank);
}

/* Writes bytes [offset, offset + bytes) of buffer b: on the device, or in the host region. Nothing
 * for none (an empty tensor's region may be one the plan never sized, and no backend was given). */
static tf_status put(tf_session *s, const tf_plan_buffer *b, int64_t offset, const void *data, int64_t bytes) {
  if (!tf_session_holds(s, (int32_t)(b - s->plan->buffers)))
    return not_held(s, b);
  if (bytes == 0)
    return NULL;
  if (b->region == TF_REGION_HOST) {
    memcpy((char *)s->host.region + b->offset + offset, data, (size_t)bytes);
    return NULL;
  }
  return s->backend->upload(s->state, s->regions[b->region], b->offset + offset, data, bytes);
}

static tf_status get(tf_session *s, const tf_plan_buffer *b, int64_t offset, void *data, int64_t bytes);

/* Reads bytes [offset, offset + bytes) of buffer b held in pieces (ZeRO: held_by -1) from its pieces
 * (its views), in buffer order: those this session holds from the device, the others whole through
 * the remote read (rank 0 gathering a checkpoint). */
static tf_status get_pieces(tf_session *s, const tf_plan_buffer *b, int64_t offset, void *data, int64_t bytes) {
  const int32_t id = (int32_t)(b - s->plan->buffers);
  for (int32_t i = 0; i < s->plan->n_buffers; i++) {
    const tf_plan_buffer *piece = &s->plan->buffers[i];
    if (piece->view_of != id + 1)
      continue;
    const int64_t from = piece->view_at > offset ? piece->view_at : offset;
    const int64_t to = piece->view_at + piece->bytes < offset + bytes ? piece->view_at + piece->bytes : offset + bytes;
    if (from < to)
      TF_RETURN_IF_ERROR(get(s, piece, from - piece->view_at, (char *)data + (from - offset), to - from));
  }
  return NULL;
}

/* Reads bytes [offset, offset + bytes) of buffer b (the caller has synchronised the device); nothing
 * for none, as put(). */
static tf_status get(tf_session *s, const tf_plan_buffer *b, int64_t offset, void *data, int64_t bytes) {
  const int32_t id = (int32_t)(b - s->plan->buffers);
  if (bytes == 0)
    return NULL;
  if (b->held_by < 0)
    return get_pieces(s, b, offset, data, bytes);
  if (!tf_session_holds(s, id) && s->remote_read && offset == 0 && bytes == b->bytes)
    return s->remote_read(s->remote_context, id, data, bytes);
  if (!tf_session_holds(s, id))
    return not_held(s, b);
  if (b->region == TF_REGION_HOST) {
    memcpy(data, (const char *)s->host.region + b->offset + offset, (size_t)bytes);
    return NULL;
  }
  return s->backend->download(s->state, s->regions[b->region], b->offset + offset, data, bytes);
}

/* The read scratch (runtime/session_scratch.h): as large as the largest buffer of the parameters,
 * gradients and optimizer state, at most TF_SESSION_SCRATCH_MAX_BYTES. */
static tf_status allocate_scratch(tf_session *s) {
  const uint32_t roles =
      (1u << TF_ROLE_PARAMETER) | (1u << TF_ROLE_GRADIENT) | (1u << TF_ROLE_OPTIMIZER_STATE) | (1u << TF_ROLE_STATE);
  int64_t bytes = 0;
  for (int32_t i = 0; i < s->plan->n_buffers; i++) {
    const tf_plan_buffer *b = &s->plan->buffers[i];
    if ((roles & (1u << b->role)) && b->bytes > bytes)
      bytes = b->bytes;
  }
  bytes = bytes < TF_SESSION_SCRATCH_MAX_BYTES ? (bytes + 7) / 8 * 8 : TF_SESSION_SCRATCH_MAX_BYTES;
  if (bytes == 0)
    return NULL;
  s->scratch = malloc((size_t)bytes);
  if (!s->scratch)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot allocate the session's %lld-byte read scratch",
                         (long long)bytes);
  s->scratch_bytes = bytes;
  return NULL;
}

void *tf_session_scratch(tf_session *session, int64_t *bytes) {
  *bytes = session->scratch_bytes;
  return session->scratch;
}

const tf_backend_vtable *tf_session_backend(tf_session *session, void **state, void *const **regions) {
  *state = session->state;
  *regions = session->regions;
  return session->backend;
}

tf_session_options tf_session_options_default(void) {
  tf_session_options options;
  memset(&options, 0, sizeof(options));
  options.backend = "cpu";
  return options;
}

static tf_status counted_alloc(tf_session *s, int64_t bytes, void **region) {
  if (s->created)
    s->memory.allocations_after_create++;
  TF_RETURN_IF_ERROR(s->backend->alloc_region(s->state, bytes, region));
  s->memory.allocations++;
  s->asked_bytes += bytes;
  return NULL;
}

/* What the backend says it holds; false (and -1s) when it does not measure. */
static bool backend_measure(const tf_session *s, tf_device_memory *out) {
  *out = (tf_device_memory){-1, -1, -1, -1};
  if (!s->backend->memory || !s->state)
    return false;
  tf_status status = s->backend->memory(s->state, out);
  bool measured = status == NULL && out->region_bytes >= 0;
  tf_status_free(status);
  return measured;
}

/* Host staging for initial values: at most this many bytes at a time, so that creating a session
 * never holds a second copy of a large parameter (gpt2-small's 147 MiB embedding) in host memory,
 * which on the CPU backend is the device's. */
#define TF_SESSION_STAGING_BYTES ((int64_t)1 << 20)

/* A half buffer's generated initial value: the f32 values an f32 buffer drawn from `name` would get,
 * each rounded to nearest even (core/half_bits.h), into host[0, count); made 4096 at a time on the
 * stack, so no second staging buffer exists. */
static tf_status stage_half(const tf_session *s, const tf_plan_buffer *b, const char *name, int64_t begin,
                            int64_t count, void *host) {
  float wide[4096];
  uint16_t *out = host;
  for (int64_t done = 0; done < count;) {
    const int64_t n = count - done < 4096 ? count - done : 4096;
    TF_RETURN_IF_ERROR(tf_init_fill_range(&b->init, name, b->rank, b->shape, s->seed, TF_F32, begin + done, n, wide));
    tf_half_from_f32_array(wide, out + done, n, b->dtype == TF_BF16);
    done += n;
  }
  return NULL;
}

static bool is_float(tf_dtype dtype) { return dtype == TF_F32 || dtype == TF_F16 || dtype == TF_BF16; }

/* count elements of a file's float tensor from `from`, in buffer b's float dtype: widened exactly,
 * or rounded to nearest even (a bf16 parameter from an f32 file, its f32 master from a bf16 one). */
static void stage_converted(const tf_plan_buffer *b, tf_dtype file_dtype, const void *from, int64_t count, void *host) {
  if (b->dtype == TF_F32) {
    tf_f32_from_half_array(from, host, count, file_dtype == TF_BF16);
    return;
  }
  float wide[4096];
  const char *in = from;
  for (int64_t done = 0; done < count;) {
    const int64_t n = count - done < 4096 ? count - done : 4096;
    if (file_dtype == TF_F32)
      memcpy(wide, in + done * 4, (size_t)n * 4);
    else
      tf_f32_from_half_array(in + done * 2, (uint32_t *)wide, n, file_dtype == TF_BF16);
    tf_half_from_f32_array(wide, (uint16_t *)host + done, n, b->dtype == TF_BF16);
    done += n;
  }
}

/* Buffer id's initial value is elements [first, first + its count) of buffer *whole's: a ZeRO piece
 * of a half parameter's master (compiler/zero.c) is its range of the whole master's; any other
 * buffer is its own whole. */
static int32_t whole_of(const tf_plan *plan, int32_t id, int64_t *first) {
  const tf_plan_buffer *b = &plan->buffers[id];
  *first = 0;
  if (b->view_of <= 0 || b->view_of > plan->n_buffers)
    return id;
  *first = b->view_at / tf_dtype_size(b->dtype);
  return b->view_of - 1;
}

/* Fills host[0, count) with elements [begin, begin + count) of buffer id's initial value. */
static tf_status stage_elements(const tf_session *s, int32_t id, const tf_safetensors_tensor *view, int64_t begin,
                                int64_t count, void *host) {
  int64_t first;
  const int32_t whole = whole_of(s->plan, id, &first);
  const tf_plan_buffer *b = &s->plan->buffers[whole];
  begin += first;
  int64_t element = tf_dtype_size(b->dtype);
  if (b->init.kind == TF_INIT_EXTERNAL && view->dtype != b->dtype) {
    stage_converted(b, view->dtype, (const char *)view->data + begin * tf_dtype_size(view->dtype), count, host);
    return NULL;
  }
  if (b->init.kind == TF_INIT_EXTERNAL) {
    memcpy(host, (const char *)view->data + begin * element, (size_t)(count * element));
    return NULL;
  }
  const char *name = tf_plan_init_name(s->plan, whole);
  if (b->dtype == TF_F16 || b->dtype == TF_BF16)
    return stage_half(s, b, name, begin, count, host);
  if (b->dtype != TF_F32 && b->dtype != TF_I32 && b->dtype != TF_I64 && b->dtype != TF_U8)
    return tf_status_new(TF_ERR_UNSUPPORTED, "'%s': cannot initialise %s tensors", b->name, tf_dtype_name(b->dtype));
  return tf_init_fill_range(&b->init, name, b->rank, b->shape, s->seed, b->dtype, begin, count, host);
}

/* The file's tensor for external buffer b: of b's dtype and shape, or of another float dtype when
 * b's is one (stage_converted converts it). */
static tf_status find_external(const tf_safetensors *file, const tf_plan_buffer *b, tf_safetensors_tensor *view) {
  TF_RETURN_IF_ERROR(tf_safetensors_find(file, b->init.key, view));
  const tf_dtype dtype = is_float(view->dtype) && is_float(b->dtype) ? view->dtype : b->dtype;
  return tf_safetensors_expect(file, b->init.key, dtype, b->rank, b->shape, view);
}

static tf_status init_buffer(tf_session *s, int32_t id, const char *weights_dir) {
  const tf_plan_buffer *b = &s->plan->buffers[id];
  if (b->init.kind == TF_INIT_NONE || b->bytes == 0 || !tf_session_holds(s, id))
    return NULL;
  int64_t element = tf_dtype_size(b->dtype);
  if (element <= 0)
    return tf_status_new(TF_ERR_UNSUPPORTED, "initialising '%s': dtype %s has no size", b->name,
                         tf_dtype_name(b->dtype));
  int64_t total = b->bytes / element, per_chunk = TF_SESSION_STAGING_BYTES / element;
  int64_t chunk_bytes = (total < per_chunk ? total : per_chunk) * element;
  void *host = malloc((size_t)chunk_bytes);
  if (!host)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot stage '%s' (%" PRId64 " bytes)", b->name, chunk_bytes);
  tf_status status = NULL;
  tf_safetensors *file = NULL;
  tf_safetensors_tensor view;
  memset(&view, 0, sizeof(view));
  if (b->init.kind == TF_INIT_EXTERNAL) {
    char path[4096];
    int64_t first;
    const tf_plan_buffer *whole = &s->plan->buffers[whole_of(s->plan, id, &first)];
    status = tf_weights_path(s->plan, weights_dir, b->init.file, path, sizeof(path));
    if (!status)
      status = tf_safetensors_open(path, &file);
    if (!status)
      status = find_external(file, whole, &view);
  }
  for (int64_t begin = 0; begin < total && !status; begin += per_chunk) {
    int64_t count = total - begin < per_chunk ? total - begin : per_chunk;
    status = stage_elements(s, id, &view, begin, count, host);
    if (!status)
      status = put(s, b, begin * element, host, count * element);
  }
  tf_safetensors_close(file);
  free(host);
  return status ? tf_status_prefix(status, "initialising '%s'", b->name) : NULL;
}

/* Writes the loss scale 2^loss_scale_log2 into the loss gradient's seed (f16 plans). */
static tf_status write_seed(tf_session *s) {
  if (!s->scaling.scaled)
    return NULL;
  const tf_plan_buffer *b = &s->plan->buffers[s->plan->loss_scale_seed];
  const float scale = ldexpf(1.0f, s->scaling.loss_scale_log2);
  return s->backend->upload(s->state, s->regions[b->region], b->offset, &scale, sizeof(scale));
}

/* The plan's initial loss scale, checked by tf_plan_verify to be 2^e within range. */
static tf_status start_scaling(tf_session *s, int64_t growth_interval) {
  if (growth_interval < 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "loss scale growth interval %" PRId64 ": it must be >= 1 (0: 2000)",
                         growth_interval);
  s->growth_interval = growth_interval > 0 ? growth_interval : 2000;
  s->scaling.scaled = s->plan->loss_scale_seed >= 0;
  if (!s->scaling.scaled)
    return NULL;
  int exponent;
  frexp(s->plan->training_config.loss_scale, &exponent);
  s->scaling.loss_scale_log2 = s->scaling.previous_log2 = exponent - 1;
  return write_seed(s);
}

/* An input or label of the io region: what each micro-step must be given (tf_session_micro_step). */
static bool fed(const tf_plan_buffer *b) {
  return b->region == TF_REGION_IO && (b->role == TF_ROLE_INPUT || b->role == TF_ROLE_LABEL);
}

/* s->fed: each io input and label a micro-step must be given, its twin stood for by the primary;
 * s->written: a flag per plan buffer (calloc'ed for at least one, so that none means a null). */
static tf_status find_fed(tf_session *s) {
  const tf_plan *plan = s->plan;
  s->written = calloc((size_t)plan->n_buffers + 1, sizeof(bool));
  s->fed = calloc((size_t)plan->n_buffers + 1, sizeof(int32_t));
  if (!s->written || !s->fed)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot allocate the inputs' written flags");
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if (fed(b) && !(b->io_twin >= 0 && b->io_twin < i))
      s->fed[s->n_fed++] = i;
  }
  return NULL;
}

tf_status tf_session_create(const tf_plan *plan, const tf_session_options *options, tf_session **out) {
  *out = NULL;
  tf_session_options defaults = tf_session_options_default();
  if (!options)
    options = &defaults;
  const char *name = options->backend ? options->backend : "cpu";
  const int32_t ranks = plan->ranks > 1 ? plan->ranks : 1;
  if (options->rank < 0 || options->rank >= ranks)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "rank %d: the plan is one of %d rank%s (0..%d)", options->rank, ranks,
                         ranks > 1 ? "s" : "", ranks - 1);
  const tf_backend_vtable *backend = NULL;
  TF_RETURN_IF_ERROR(tf_backend_load(name, &backend));
  tf_session *s = calloc(1, sizeof(tf_session));
  if (!s)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot allocate a session");
  s->plan = plan;
  s->backend = backend;
  s->seed = options->seed;
  s->host_threads = options->threads > 0 ? options->threads : 2;
  s->rank = options->rank;
  s->memory.planned_bytes = tf_plan_total_bytes(plan);
  tf_backend_options backend_options = {.device = options->device,
                                        .threads = options->threads > 0 ? options->threads : 2};
  tf_status status = backend->create(&backend_options, &s->state);
  for (int r = 0; r < TF_REGION_COUNT && !status; r++)
    if (plan->region_bytes[r] > 0)
      status = tf_status_prefix(counted_alloc(s, plan->region_bytes[r], &s->regions[r]), "the %s region",
                                tf_region_name((tf_region)r));
  if (!status)
    status = tf_poison_if_asked(backend, s->state, plan, s->regions); /* TIGHTFIT_POISON_ARENA=1 */
  if (!status)
    status = tf_host_steps_create(plan, backend, s->state, &s->host);
  if (!status)
    status = tf_host_steps_hand_copies(&s->host, plan);
  for (int32_t i = 0; i < plan->n_buffers && !status; i++)
    status = init_buffer(s, i, options->weights_dir);
  if (!status)
    status = backend->prepare(s->state, plan, s->regions);
  if (!status)
    status = start_scaling(s, options->loss_scale_growth_interval);
  if (!status)
    status = allocate_scratch(s);
  if (!status)
    status = find_fed(s);
  if (status) {
    tf_session_destroy(s);
    return tf_status_prefix(status, "session on %s", name);
  }
  while (s->forward_end < plan->n_steps && plan->steps[s->forward_end].phase == TF_PHASE_FORWARD)
    s->forward_end++;
  backend_measure(s, &s->created_measure);
  s->created = true;
  *out = s;
  return NULL;
}

void tf_session_destroy(tf_session *s) {
  if (!s)
    return;
  // A run may still be in flight when a step failed after its submission (a Vulkan validation
  // message turned into an error, a later range's failure): the regions go only after it ends.
  if (s->state && s->backend->synchronize)
    tf_status_free(s->backend->synchronize(s->state));
  for (int r = 0; r < TF_REGION_COUNT; r++)
    if (s->regions[r])
      s->backend->free_region(s->state, s->regions[r]);
  tf_host_steps_destroy(&s->host); /* page-locked by the backend, maybe: before its state goes */
  if (s->state)
    s->backend->destroy(s->state);
  free(s->scratch);
  free(s->pauses);
  free(s->written);
  free(s->fed);
  free(s);
}

/* Region bytes as the backend counted them at its allocation calls (what it was asked for; its
 * rounding shows in tf_session_device_memory). When the regions it holds differ from what it held
 * when create returned, something allocated (or freed) device memory since: that counts as one
 * allocation after create at least, since the backend's measure has no call count. */
tf_session_memory tf_session_memory_use(const tf_session *s) {
  tf_session_memory m = s->memory;
  m.allocated_bytes = s->asked_bytes;
  tf_device_memory now;
  if (backend_measure(s, &now)) {
    m.allocated_bytes = now.region_bytes;
    bool changed = now.region_bytes != s->created_measure.region_bytes ||
                   now.region_device_bytes != s->created_measure.region_device_bytes;
    m.allocations_after_create += changed;
  }
  return m;
}

int32_t tf_session_host_steps_on_device(const tf_session *s) { return s->host.n_by_backend; }

tf_status tf_session_device_memory(const tf_session *s, tf_device_memory *out) {
  *out = (tf_device_memory){-1, -1, -1, -1};
  if (!s->backend->memory)
    return tf_status_new(TF_ERR_UNSUPPORTED, "the %s backend does not measure device memory", s->backend->name);
  return s->backend->memory(s->state, out);
}
tf_status tf_session_alloc_host(tf_session *s, int64_t bytes, void **host) {
  *host = NULL;
  return s->backend->alloc_host ? s->backend->alloc_host(s->state, bytes, host) : NULL;
}

void tf_session_free_host(tf_session *s, void *host) {
  if (host && s->backend->free_host)
    s->backend->free_host(s->state, host);
}

const tf_plan *tf_session_plan(const tf_session *s) { return s->plan; }
int64_t tf_session_optimizer_steps(const tf_session *s) { return s->optimizer_steps; }
int64_t tf_session_micro_steps(const tf_session *s) { return s->micro_steps; }

void tf_session_set_counters(tf_session *s, int64_t optimizer_steps, int64_t micro_steps) {
  s->optimizer_steps = optimizer_steps;
  s->micro_steps = micro_steps;
}

/* The buffer `name`; for io buffers, the half the next micro-step reads. */
static tf_status find_buffer(const tf_session *s, const char *name, int64_t bytes, int32_t *id) {
  for (int32_t i = 0; i < s->plan->n_buffers; i++) {
    const tf_plan_buffer *b = &s->plan->buffers[i];
    if (strcmp(b->name, name) != 0 || b->role == TF_ROLE_WORKSPACE)
      continue;
    if (b->region == TF_REGION_IO && b->io_twin >= 0 && b->io_twin < i)
      continue; /* the twin of an earlier buffer: take the primary */
    if (bytes != b->bytes)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT, "buffer '%s' holds %" PRId64 " bytes, not %" PRId64, name, b->bytes,
                           bytes);
    *id = (b->region == TF_REGION_IO && s->io_slot == 1 && b->io_twin >= 0) ? b->io_twin : i;
    return NULL;
  }
  return tf_status_new(TF_ERR_INVALID_ARGUMENT, "the plan has no buffer named '%s'", name);
}

/* Half parameter `param`'s f32 master (or this rank's pieces of it, ZeRO) from the parameter's new
 * values `data`, widened: the next update then starts from what was written. */
static tf_status write_master(tf_session *s, int32_t param, const void *data) {
  const int32_t master = tf_plan_master_of(s->plan, param);
  const tf_plan_buffer *p = &s->plan->buffers[param];
  for (int32_t id = 0; master >= 0 && id < s->plan->n_buffers; id++) {
    const tf_plan_buffer *b = &s->plan->buffers[id];
    if ((id != master && b->view_of != master + 1) || !tf_session_holds(s, id))
      continue;
    const int64_t first = b->view_at / 4, total = b->bytes / 4;
    uint32_t wide[4096];
    for (int64_t done = 0; done < total;) {
      const int64_t n = total - done < 4096 ? total - done : 4096;
      tf_f32_from_half_array((const uint16_t *)data + first + done, wide, n, p->dtype == TF_BF16);
      TF_RETURN_IF_ERROR(put(s, b, done * 4, wide, n * 4));
      done += n;
    }
  }
  return NULL;
}

tf_status tf_session_write(tf_session *s, const char *name, const void *data, int64_t bytes) {
  int32_t id = -1; /* set by find_buffer when it succeeds (-Wmaybe-uninitialized in Release) */
  TF_RETURN_IF_ERROR(find_buffer(s, name, bytes, &id));
  TF_RETURN_IF_ERROR(put(s, &s->plan->buffers[id], 0, data, bytes));
  s->written[id] = true;
  const tf_plan_buffer *b = &s->plan->buffers[id];
  return b->role == TF_ROLE_PARAMETER && (b->dtype == TF_BF16 || b->dtype == TF_F16) ? write_master(s, id, data) : NULL;
}

tf_status tf_session_read(tf_session *s, const char *name, void *data, int64_t bytes) {
  int32_t id = -1; /* set by find_buffer when it succeeds (-Wmaybe-uninitialized in Release) */
  TF_RETURN_IF_ERROR(find_buffer(s, name, bytes, &id));
  TF_RETURN_IF_ERROR(s->backend->synchronize(s->state));
  return get(s, &s->plan->buffers[id], 0, data, bytes);
}

/* Bytes [offset, offset + bytes) of buffer `buffer`, checked to lie inside it. */
static tf_status check_range(const tf_session *s, int32_t buffer, int64_t offset, int64_t bytes) {
  if (buffer < 0 || buffer >= s->plan->n_buffers)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "no buffer %d: the plan has %d", buffer, s->plan->n_buffers);
  const tf_plan_buffer *b = &s->plan->buffers[buffer];
  if (offset < 0 || bytes < 0 || offset > b->bytes || bytes > b->bytes - offset)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "bytes [%" PRId64 ", %" PRId64 " + %" PRId64 ") are not inside buffer '%s' of %" PRId64
                         " bytes",
                         offset, offset, bytes, b->name, b->bytes);
  return NULL;
}

tf_status tf_session_read_range(tf_session *s, int32_t buffer, int64_t offset, void *data, int64_t bytes) {
  TF_RETURN_IF_ERROR(check_range(s, buffer, offset, bytes));
  TF_RETURN_IF_ERROR(s->backend->synchronize(s->state));
  return get(s, &s->plan->buffers[buffer], offset, data, bytes);
}

tf_status tf_session_write_range(tf_session *s, int32_t buffer, int64_t offset, const void *data, int64_t bytes) {
  TF_RETURN_IF_ERROR(check_range(s, buffer, offset, bytes));
  TF_RETURN_IF_ERROR(put(s, &s->plan->buffers[buffer], offset, data, bytes));
  s->written[buffer] = true;
  return NULL;
}

static tf_status read_loss(tf_session *s, double *loss) {
  *loss = NAN;
  if (s->plan->loss < 0)
    return NULL;
  const tf_plan_buffer *b = &s->plan->buffers[s->plan->loss];
  float value;
  TF_RETURN_IF_ERROR(s->backend->synchronize(s->state));
  TF_RETURN_IF_ERROR(s->backend->download(s->state, s->regions[b->region], b->offset, &value, sizeof(value)));
  *loss = value;
  return NULL;
}

/* A skipped update does not count as one for AdamW's bias corrections (torch.cuda.amp.GradScaler
 * skips optimizer.step() alike). */
static tf_run_state run_state(const tf_session *s) {
  tf_run_state run = {s->optimizer_steps - s->scaling.skipped_steps + 1, s->micro_steps, s->seed,
                      s->scaling.scaled ? s->scaling.loss_scale_log2 : 0};
  return run;
}

/* Device steps [begin, end) of a block, in the ranges this session runs: a ZeRO plan's updates held
 * by other ranks are theirs (each rank updates its shard; tools/dist.c sends the parameters). */
static tf_status run_device(tf_session *s, int32_t begin, int32_t end, int32_t io_slot, const tf_run_state *run) {
  if (s->plan->zero == 0)
    return s->backend->run(s->state, begin, end, io_slot, run);
  int32_t from = begin;
  for (int32_t i = begin; i <= end; i++) {
    const int32_t held = i < end ? s->plan->steps[i].held_by : -1;
    if (held == 0 || held == s->rank + 1)
      continue;
    if (i > from)
      TF_RETURN_IF_ERROR(s->backend->run(s->state, from, i, io_slot, run));
    from = i + 1;
  }
  return NULL;
}

/* Whether host step h runs within device steps [begin, end) of its block: before one of them, or
 * after the last (host_at == end: before the pause that may end the range, so that what it adds is
 * there for the pause's reduction); one before `begin` ran with the range before, unless `begin`
 * starts the block. */
static bool host_step_within(const tf_plan *plan, int32_t h, bool optimizer, int32_t begin, int32_t end) {
  const int32_t at = plan->host_at[h], block_start = optimizer ? plan->micro_steps : 0;
  return at <= end && (at > begin || at == block_start);
}

/* Runs device steps [begin, end) of the micro-batch block (or with `optimizer` the optimizer block)
 * with the block's host steps among them: each after the device step before its host_at, the device
 * synchronised first (compiler/offload.c places them; runtime/host_steps.c runs them). A block cut
 * at pauses (tf_session_set_pauses) runs as ranges, each host step in the one it falls in. */
static tf_status run_block(tf_session *s, bool optimizer, int32_t begin, int32_t end, const tf_run_state *run) {
  const tf_plan *plan = s->plan;
  const tf_cpu_context context = {.threads = s->host_threads,
                                  .optimizer_step = run->optimizer_step,
                                  .micro_step = run->micro_step,
                                  .seed = run->seed,
                                  .loss_scale_log2 = run->loss_scale_log2};
  const int32_t io_slot = optimizer ? 0 : s->io_slot;
  int32_t done = begin;
  for (int32_t h = 0; h < plan->n_host_steps; h++) {
    if ((plan->host_steps[h].phase == TF_PHASE_OPTIMIZER) != optimizer ||
        !host_step_within(plan, h, optimizer, begin, end))
      continue;
    const int32_t held = plan->host_steps[h].held_by;
    if ((held > 0 && held != s->rank + 1) || /* another rank's update (ZeRO: its shard of the state) */
        s->host.by_backend[h])               /* an activation's copy the backend runs among its steps */
      continue;
    const int32_t at = plan->host_at[h];
    if (at > done) {
      TF_RETURN_IF_ERROR(run_device(s, done, at, io_slot, run));
      done = at;
    }
    TF_RETURN_IF_ERROR(s->backend->synchronize(s->state));
    TF_RETURN_IF_ERROR(tf_host_step_run(&s->host, plan, h, s->backend, s->state, s->regions, &context));
  }
  return run_device(s, done, end, io_slot, run); /* an empty block is a run too, as before */
}

/* The micro-batch block, paused after each of s->pauses (tf_session_set_pauses). */
static tf_status run_micro_block(tf_session *s, const tf_run_state *run) {
  int32_t from = 0;
  for (int32_t i = 0; i < s->n_pauses; i++) {
    TF_RETURN_IF_ERROR(run_block(s, false, from, s->pauses[i] + 1, run));
    TF_RETURN_IF_ERROR(s->backend->synchronize(s->state));
    TF_RETURN_IF_ERROR(s->pause(s->pause_context, s->pauses[i]));
    from = s->pauses[i] + 1;
  }
  return run_block(s, false, from, s->plan->micro_steps, run);
}

/* Fed buffer i's (a primary) buffer in the half the next micro-step reads: itself, or its twin. */
static int32_t fed_now(const tf_session *s, int32_t i) {
  const int32_t twin = s->plan->buffers[i].io_twin;
  return s->io_slot == 1 && twin >= 0 ? twin : i;
}

/* Refuses a run (`what`: "micro-step N" or "forward pass") whose half of the io region holds an
 * input or label not written since a micro-step last read that half: it would run on the zeros the
 * region started with, or on the batch of two micro-steps before (the halves alternate). */
static tf_status check_inputs(const tf_session *s, const char *what) {
  for (int32_t k = 0; k < s->n_fed; k++) {
    const tf_plan_buffer *b = &s->plan->buffers[s->fed[k]];
    if (!s->written[fed_now(s, s->fed[k])])
      return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                           "%s: %s '%s' was not written since the last micro-step that read its half of the io "
                           "region (write every input and label before each run: tf_session_write; the halves "
                           "alternate)",
                           what, b->role == TF_ROLE_LABEL ? "label" : "input", b->name);
  }
  return NULL;
}

/* check_inputs for the next micro-step, then marks its half read. */
static tf_status take_inputs(tf_session *s) {
  char what[48];
  snprintf(what, sizeof(what), "micro-step %" PRId64, s->micro_steps + 1);
  TF_RETURN_IF_ERROR(check_inputs(s, what));
  for (int32_t k = 0; k < s->n_fed; k++)
    s->written[fed_now(s, s->fed[k])] = false;
  return NULL;
}

tf_status tf_session_micro_step(tf_session *s, double *loss) {
  TF_RETURN_IF_ERROR(take_inputs(s));
  tf_run_state run = run_state(s);
  TF_RETURN_IF_ERROR(run_micro_block(s, &run));
  s->micro_steps++;
  tf_status status = read_loss(s, loss);
  s->io_slot ^= 1;
  return status;
}

/* After an optimizer step: was its update skipped (the overflow check not finite)? Then, for f16
 * plans, the loss scale halves; after growth_interval good steps in a row it doubles (as
 * torch.cuda.amp.GradScaler does), within TF_LOSS_SCALE_MIN_LOG2..MAX_LOG2. */
static tf_status follow_overflow_check(tf_session *s) {
  tf_session_scaling *c = &s->scaling;
  c->previous_log2 = c->loss_scale_log2;
  c->last_skipped = false;
  if (s->plan->overflow_check < 0)
    return NULL;
  const tf_plan_buffer *b = &s->plan->buffers[s->plan->overflow_check];
  float sum_of_squares;
  TF_RETURN_IF_ERROR(get(s, b, 0, &sum_of_squares, sizeof(sum_of_squares))); /* on the device, or the host's */
  c->last_skipped = !isfinite(sum_of_squares);
  if (c->last_skipped) {
    c->skipped_steps++;
    c->good_steps = 0;
    if (c->scaled && c->loss_scale_log2 > TF_LOSS_SCALE_MIN_LOG2)
      c->loss_scale_log2--;
  } else if (c->scaled && ++c->good_steps >= s->growth_interval) {
    c->good_steps = 0;
    if (c->loss_scale_log2 < TF_LOSS_SCALE_MAX_LOG2)
      c->loss_scale_log2++;
  }
  return c->loss_scale_log2 != c->previous_log2 ? write_seed(s) : NULL;
}

tf_status tf_session_optimizer_step(tf_session *s) {
  tf_run_state run = run_state(s);
  TF_RETURN_IF_ERROR(run_block(s, true, s->plan->micro_steps, s->plan->n_steps, &run));
  TF_RETURN_IF_ERROR(s->backend->synchronize(s->state));
  s->optimizer_steps++;
  return follow_overflow_check(s);
}

tf_session_scaling tf_session_scaling_state(const tf_session *s) { return s->scaling; }

tf_status tf_session_set_scaling(tf_session *s, int32_t loss_scale_log2, int64_t good_steps, int64_t skipped_steps) {
  if (good_steps < 0 || skipped_steps < 0 || skipped_steps > s->optimizer_steps)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "loss scaling state: %" PRId64 " good steps and %" PRId64 " skipped steps (of %" PRId64
                         " optimizer steps) are out of range",
                         good_steps, skipped_steps, s->optimizer_steps);
  if (s->scaling.scaled && (loss_scale_log2 < TF_LOSS_SCALE_MIN_LOG2 || loss_scale_log2 > TF_LOSS_SCALE_MAX_LOG2))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "loss scale 2^%" PRId32 " is outside 2^%d..2^%d", loss_scale_log2,
                         TF_LOSS_SCALE_MIN_LOG2, TF_LOSS_SCALE_MAX_LOG2);
  s->scaling.good_steps = good_steps;
  s->scaling.skipped_steps = skipped_steps;
  s->scaling.last_skipped = false;
  if (!s->scaling.scaled)
    return NULL;
  s->scaling.loss_scale_log2 = s->scaling.previous_log2 = loss_scale_log2;
  return write_seed(s);
}

tf_status tf_session_forward(tf_session *s, double *loss) {
  TF_RETURN_IF_ERROR(check_inputs(s, "forward pass")); /* reads the half without consuming it */
  tf_run_state run = run_state(s);
  TF_RETURN_IF_ERROR(s->backend->run(s->state, 0, s->forward_end, s->io_slot, &run));
  return read_loss(s, loss);
}
