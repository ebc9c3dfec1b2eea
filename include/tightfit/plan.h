/* A plan: what the compiler emits and the runtime executes. Memory is a few regions, each
 * allocated once; every tensor is a buffer at a fixed offset in one of them; the program is a list
 * of steps. Steps [0, micro_steps) are the micro-batch block, run `accumulate` times per training
 * step, with its forward steps first (a loss is evaluated by running them alone); steps
 * [micro_steps, n_steps) are the optimizer block, run once after them.
 *
 * A plan file (.tfplan, FlatBuffers identifier TFPL) is untrusted input: tf_plan_load() runs
 * tf_plan_verify(), which checks every invariant below, and refuses a plan that breaks one. The
 * structs themselves (tf_plan, tf_plan_buffer, tf_plan_step) are in tightfit/plan_types.h. */
#ifndef TIGHTFIT_PLAN_H
#define TIGHTFIT_PLAN_H

#include "tightfit/plan_types.h"
#include "tightfit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Destroys a plan and everything it owns; NULL is allowed. */
void tf_plan_destroy(tf_plan *plan);

/* Checks every invariant: buffers inside their regions with exact, aligned sizes; buffers of
 * persistent regions disjoint; arena buffers live at a common step disjoint in memory; each step's
 * op, arity and operand shapes valid (the op's shape rule reproduces its outputs); step outputs
 * are arena activations, or (accumulate 1) gradients a backward step writes once; every step reads
 * only buffers already written; forward steps come first. The message names the buffer or step and
 * the numbers. */
tf_status tf_plan_verify(const tf_plan *plan) TF_MUST_USE;

/* Fills from[id]..to[id] (n_buffers entries each) with the steps at which arena buffer id's bytes
 * count as live: its own live steps less those where an earlier buffer on the same memory (an
 * alias_of chain) still counts them, so every byte counts once a step; from > to for none (and
 * for buffers outside the arena). Every live-bytes sum uses this. */
tf_status tf_plan_counted_steps(const tf_plan *plan, int32_t *from, int32_t *to) TF_MUST_USE;

/* Total bytes of all regions: what a session allocates (before a backend's fixed overhead). */
int64_t tf_plan_total_bytes(const tf_plan *plan);
/* The sum of the plan's device overhead parts. */
int64_t tf_plan_overhead_bytes(const tf_plan *plan);
/* The steps a CUDA backend captures into graphs for `plan`: the micro-batch block and the forward
 * prefix once per io half, and the optimizer block once (what the "graphs" overhead part scales with). */
int64_t tf_plan_graph_steps(const tf_plan *plan);
/* Whether the plan updates parameters inside the micro-batch block (compiled with
 * update_in_backward): its gradients do not outlive their updates, so none can be read between
 * the blocks. */
bool tf_plan_updates_in_backward(const tf_plan *plan);
/* Regions + device overhead: everything the device holds while the plan runs; what a budget is
 * compared with. */
int64_t tf_plan_device_total(const tf_plan *plan);
/* Operand k of `step`: input k, or for k >= n_inputs output k - n_inputs; *written says whether the
 * step writes it (an output, or an input the op updates in place). */
int32_t tf_plan_step_operand(const tf_plan_step *step, int32_t k, bool *written);
/* Whether `step` reads operand k's values (zero only writes its input; outputs are written). */
bool tf_plan_step_reads(const tf_plan_step *step, int32_t k);
/* The name whose hash draws buffer `id`'s generated initial values: its own, or for the f32 master
 * of a half parameter (optimizer state with an initialiser) the parameter's, so both draw the same. */
const char *tf_plan_init_name(const tf_plan *plan, int32_t id);
/* The name of half parameter `param`'s f32 master ("master(param)"): its buffer's, and its tensor's in
 * checkpoints, which load across parameter dtypes by it (runtime/checkpoint.c). */
void tf_plan_master_name(const char *param, char *name, size_t size);
/* The buffer of parameter `param`'s f32 master (whole, not a ZeRO piece), or -1 when it has none. */
int32_t tf_plan_master_of(const tf_plan *plan, int32_t param);
/* The bytes a training step of an offloaded plan moves between device and host: each host step's
 * device operands down, and those it writes up again, once per run (a micro-batch block's host step
 * runs `accumulate` times); under ZeRO, on the rank that moves most (each runs its own updates); 0
 * without host steps. */
int64_t tf_plan_host_moved_bytes(const tf_plan *plan);

/* Whether the plan keeps its gradients in host memory (compiled with --offload gradients). */
bool tf_plan_offloads_gradients(const tf_plan *plan);
/* What an offloaded plan keeps in host memory, in words: "optimizer state", "gradients and
 * optimizer state", "activations", ... ("nothing" without host steps). */
const char *tf_plan_host_contents(const tf_plan *plan);

/* Writes a plan (after verifying it) to `path` through a temporary file. */
tf_status tf_plan_save(const tf_plan *plan, const char *path) TF_MUST_USE;
/* Serialises to a FlatBuffer followed by its checksum (16 bytes: XXH64 and the marker "TFPLXX64");
 * the caller frees *data with free(). */
tf_status tf_plan_serialize(const tf_plan *plan, void **data, size_t *size) TF_MUST_USE;
/* Loads and verifies a plan file; errors name `path`. The caller destroys *out. */
tf_status tf_plan_load(const char *path, tf_plan **out) TF_MUST_USE;
/* Like tf_plan_load() on bytes in memory; `source` names them in errors. Bytes that end in a checksum
 * trailer must match it; bytes without one (an older tightfit's plan) are not checked. */
tf_status tf_plan_parse(const void *data, size_t size, const char *source, tf_plan **out) TF_MUST_USE;

const char *tf_region_name(tf_region region);  /* "parameters", ... */
const char *tf_role_name(tf_buffer_role role); /* "parameter", ... */
const char *tf_phase_name(tf_phase phase);     /* "forward", ... */

#ifdef __cplusplus
}
#endif
#endif
