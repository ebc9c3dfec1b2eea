// The .tfplan format: flatc's generated C++ for schema/plan.fbs, wrapped behind the C API of
// schema/plan_fb.h. Decoding is structural only (see the header); values are copied as written,
// enums through memcpy (attrs_fb.h explains why), and the plan's memory comes from malloc, so that
// the C side frees it with tf_plan_destroy(). Nothing thrown crosses into C (guarded). What both
// formats do with a whole file (checks, JSON) lives in schema/fb_file.cc.
#include "schema/plan_fb.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "plan_generated.h"   // flatc --cpp schema/plan.fbs, in the build tree
#include "plan_schema_text.h" // tf_plan_schema_text[]: graph.fbs + plan.fbs, embedded at build time
#include "schema/attrs_fb.h"
#include "schema/fb_file.h"

using namespace tightfit::schema;

namespace {

// ---- the schema mirrors plan.h: each schema value equals its C value ----

// clang-format off
#define SAME(fb_value, c_value) \
  static_assert(static_cast<int>(fb::fb_value) == static_cast<int>(c_value), #fb_value " must equal " #c_value)
SAME(Region_parameters, TF_REGION_PARAMETERS); SAME(Region_gradients, TF_REGION_GRADIENTS);
SAME(Region_optimizer_state, TF_REGION_OPTIMIZER_STATE); SAME(Region_arena, TF_REGION_ARENA);
SAME(Region_io, TF_REGION_IO); SAME(Region_host, TF_REGION_HOST); SAME(Region_MAX, TF_REGION_HOST);
SAME(Role_parameter, TF_ROLE_PARAMETER); SAME(Role_constant, TF_ROLE_CONSTANT); SAME(Role_gradient, TF_ROLE_GRADIENT);
SAME(Role_optimizer_state, TF_ROLE_OPTIMIZER_STATE); SAME(Role_input, TF_ROLE_INPUT); SAME(Role_label, TF_ROLE_LABEL);
SAME(Role_activation, TF_ROLE_ACTIVATION); SAME(Role_workspace, TF_ROLE_WORKSPACE); SAME(Role_state, TF_ROLE_STATE);
SAME(Role_MAX, TF_ROLE_COUNT - 1);
SAME(Phase_forward, TF_PHASE_FORWARD); SAME(Phase_recompute, TF_PHASE_RECOMPUTE); SAME(Phase_backward, TF_PHASE_BACKWARD);
SAME(Phase_accumulate, TF_PHASE_ACCUMULATE); SAME(Phase_optimizer, TF_PHASE_OPTIMIZER);
SAME(Phase_MAX, TF_PHASE_COUNT - 1);
#undef SAME
// clang-format on

// ---- the file format ----

// What the Verifier lets through but flatc's printer cannot take: misaligned vectors of 8-byte
// values (see vector_aligned) and attribute unions it cannot print (check_attrs_printable).
tf_status check_printable(const uint8_t *bytes) {
  const fb::Plan *root = fb::GetPlan(bytes);
  const fb::Report *report = root->report();
  bool aligned = vector_aligned(root->region_bytes()) &&
                 (!report || (vector_aligned(report->role_bytes()) && vector_aligned(report->live_bytes()) &&
                              vector_aligned(report->flops())));
  for (uoffset_t i = 0; aligned && root->buffers() && i < root->buffers()->size(); i++)
    aligned = vector_aligned(root->buffers()->Get(i)->shape());
  if (!aligned)
    return tf_status_new(TF_ERR_INVALID_INPUT, "a misaligned vector of 8-byte values (corrupt FlatBuffer)");
  return check_attrs_printable(root->steps(), "step");
}

// clang-format off
const FileFormat kPlanFile = {
    "plan", "plan (.tfplan)", fb::PlanIdentifier(),     // noun, description, identifier
    "plan version", "Plan.version", TF_PLAN_VERSION,     // the version field
    "schema/plan.fbs", tf_plan_schema_text,              // for flatc's JSON printer
    fb::VerifyPlanBuffer, nullptr, check_printable,      // verify, explain_refusal, check_printable
};
// clang-format on

// ---- decode: FlatBuffer -> tf_plan ----

// calloc for `count` items that the C side frees; NULL for none. Throws on exhaustion (guarded
// turns that into an out-of-memory status).
template <typename T> T *allocate(size_t count) {
  if (count == 0)
    return nullptr;
  void *memory = std::calloc(count, sizeof(T));
  if (!memory)
    throw std::bad_alloc();
  return static_cast<T *>(memory);
}

// A malloc'd copy of a string (NULL when absent); an embedded NUL is refused.
tf_status copy_string(const flatbuffers::String *text, const char *field, char **out) {
  *out = nullptr;
  if (!text)
    return nullptr;
  TF_RETURN_IF_ERROR(check_string(text, field));
  *out = allocate<char>(text->size() + 1);
  std::memcpy(*out, text->c_str(), text->size() + 1);
  return nullptr;
}

// Copies a vector of `count` 8-byte scalars (one per region, role or phase); a file written before
// the last `newer` of them existed has that many fewer, which read as 0.
template <typename T>
tf_status read_fixed(const Vector<T> *values, const char *field, int count, const char *per, T *out, int newer = 0) {
  if (!values)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s is missing (a required field: one entry per %s)", field, per);
  if (!vector_aligned(values))
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: misaligned vector (corrupt FlatBuffer)", field);
  const uoffset_t size = values->size();
  if (size > static_cast<uoffset_t>(count) || size < static_cast<uoffset_t>(count - newer)) {
    if (newer)
      return tf_status_new(TF_ERR_INVALID_INPUT,
                           "%s has %u entries; plan version %d has %d (one per %s; %d in files "
                           "written before the last %d existed)",
                           field, size, TF_PLAN_VERSION, count, per, count - newer, newer);
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s has %u entries; plan version %d has exactly %d (one per %s)", field,
                         size, TF_PLAN_VERSION, count, per);
  }
  for (int i = 0; i < count; i++)
    out[i] = static_cast<uoffset_t>(i) < size ? values->Get(static_cast<uoffset_t>(i)) : T(0);
  return nullptr;
}

// Copies a vector of ints into a new array (NULL when empty).
int32_t *copy_ints(const Vector<int32_t> *values) {
  uoffset_t n = values ? values->size() : 0;
  int32_t *out = allocate<int32_t>(n);
  for (uoffset_t i = 0; i < n; i++)
    out[i] = values->Get(i);
  return out;
}

// Copies a required string into a fixed array of `size` bytes; absent, too long or with a NUL is refused.
tf_status copy_fixed(const flatbuffers::String *text, const char *field, char *out, size_t size) {
  if (!text)
    return tf_status_new(TF_ERR_INVALID_INPUT, "has no %s (a required field)", field);
  TF_RETURN_IF_ERROR(check_string(text, field));
  if (text->size() >= size)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s has %u bytes; at most %zu are allowed", field, text->size(),
                         size - 1);
  std::memcpy(out, text->c_str(), text->size() + 1);
  return nullptr;
}

class Decoder {
public:
  Decoder(const char *source, tf_plan *plan) : source_(source), plan_(plan) {}

  tf_status buffers(const Vector<Offset<fb::Buffer>> *buffers) {
    uoffset_t n = buffers ? buffers->size() : 0;
    plan_->buffers = allocate<tf_plan_buffer>(n);
    plan_->n_buffers = static_cast<int32_t>(n);
    return decode_each(buffers, source_, "buffer", [&](const fb::Buffer *in, uoffset_t i) {
      tf_plan_buffer &buffer = plan_->buffers[i];
      buffer.first_step = buffer.last_step = buffer.owner = buffer.io_twin = buffer.alias_of = -1;
      return buffer_at(in, &buffer);
    });
  }

  // The device steps (into steps, n_steps) or the host steps (host_steps, n_host_steps).
  tf_status steps(const Vector<Offset<fb::Step>> *steps, tf_plan_step **into, int32_t *count, const char *what) {
    uoffset_t n = steps ? steps->size() : 0;
    *into = allocate<tf_plan_step>(n);
    *count = static_cast<int32_t>(n);
    tf_plan_step *out = *into;
    return decode_each(steps, source_, what, [&](const fb::Step *in, uoffset_t i) {
      out[i].workspace = -1;
      return step_at(in, &out[i]);
    });
  }

  // Where each host step runs: one entry per host step; absent (the first offloaded plans), every
  // host step runs after the last device step.
  tf_status host_at(const Vector<int32_t> *at) {
    const uoffset_t n = static_cast<uoffset_t>(plan_->n_host_steps);
    if (at && at->size() != n)
      return tf_status_new(TF_ERR_INVALID_INPUT, "%s: host_at has %u entries for %u host steps (one per host step)",
                           source_, at->size(), n);
    plan_->host_at = allocate<int32_t>(n);
    for (uoffset_t i = 0; i < n; i++)
      plan_->host_at[i] = at ? at->Get(i) : plan_->n_steps;
    return nullptr;
  }

  tf_status symbols(const Vector<Offset<fb::BoundSymbol>> *symbols) {
    uoffset_t n = symbols ? symbols->size() : 0;
    plan_->symbol_names = allocate<char *>(n);
    plan_->symbol_values = allocate<int64_t>(n);
    plan_->n_symbols = static_cast<int32_t>(n);
    return decode_each(symbols, source_, "symbol", [&](const fb::BoundSymbol *symbol, uoffset_t i) -> tf_status {
      if (!symbol->name())
        return tf_status_new(TF_ERR_INVALID_INPUT, "has no name (a required field)");
      TF_RETURN_IF_ERROR(copy_string(symbol->name(), "name", &plan_->symbol_names[i]));
      plan_->symbol_values[i] = symbol->value();
      return nullptr;
    });
  }

  tf_status overhead(const Vector<Offset<fb::OverheadPart>> *parts) {
    uoffset_t n = parts ? parts->size() : 0;
    if (n > TF_MAX_OVERHEAD_PARTS)
      return tf_status_new(TF_ERR_INVALID_INPUT, "%s: overhead has %u parts; a plan holds at most %d", source_, n,
                           TF_MAX_OVERHEAD_PARTS);
    plan_->overhead.n_parts = static_cast<int32_t>(n);
    return decode_each(parts, source_, "overhead part", [&](const fb::OverheadPart *in, uoffset_t i) -> tf_status {
      tf_overhead_part &part = plan_->overhead.parts[i];
      TF_RETURN_IF_ERROR(copy_fixed(in->name(), "name", part.name, sizeof(part.name)));
      TF_RETURN_IF_ERROR(copy_fixed(in->source(), "source", part.source, sizeof(part.source)));
      part.bytes = in->bytes();
      return nullptr;
    });
  }

  tf_status report(const fb::Report *report) {
    if (!report)
      return fail(TF_ERR_INVALID_INPUT, source_, "the memory report (Plan.report) is missing; it is a required field");
    tf_plan_report &out = plan_->report;
    // role state (8) is newer than the first plans: their role_bytes end at workspace
    tf_status status = read_fixed(report->role_bytes(), "report.role_bytes", TF_ROLE_COUNT, "buffer role",
                                  static_cast<int64_t *>(out.role_bytes), TF_ROLE_COUNT - TF_ROLE_STATE);
    if (!status)
      status = read_fixed(report->flops(), "report.flops", TF_PHASE_COUNT, "phase", static_cast<double *>(out.flops));
    if (!status)
      status = copy_string(report->notes(), "report.notes", &out.notes);
    if (!status)
      status = live_bytes(report->live_bytes());
    if (status)
      return refuse(status, source_);
    out.arena_lower_bound = report->arena_lower_bound();
    out.arena_naive = report->arena_naive();
    out.peak_step = report->peak_step();
    return nullptr;
  }

private:
  tf_status buffer_at(const fb::Buffer *in, tf_plan_buffer *out) {
    if (!in->name())
      return tf_status_new(TF_ERR_INVALID_INPUT, "has no name (a required field)");
    TF_RETURN_IF_ERROR(copy_string(in->name(), "name", &out->name));
    store_enum(&out->role, in->role());
    store_enum(&out->region, in->region());
    store_enum(&out->dtype, in->dtype());
    out->offset = in->offset();
    out->bytes = in->bytes();
    const Vector<int64_t> *shape = in->shape();
    if (!vector_aligned(shape))
      return tf_status_new(TF_ERR_INVALID_INPUT, "shape: misaligned vector (corrupt FlatBuffer)");
    uoffset_t rank = shape ? shape->size() : 0;
    if (rank > TF_MAX_RANK)
      return tf_status_new(TF_ERR_INVALID_INPUT, "shape has %u dimensions; at most %d are allowed", rank, TF_MAX_RANK);
    out->rank = static_cast<int32_t>(rank);
    for (uoffset_t d = 0; d < rank; d++)
      out->shape[d] = shape->Get(d);
    out->first_step = in->first_step();
    out->last_step = in->last_step();
    if (const fb::Initializer *init = in->init()) {
      store_enum(&out->init.kind, init->kind());
      out->init.a = init->a();
      out->init.b = init->b();
      char *file = nullptr, *key = nullptr;
      TF_RETURN_IF_ERROR(copy_string(init->file(), "init.file", &file));
      out->init.file = file;
      TF_RETURN_IF_ERROR(copy_string(init->key(), "init.key", &key));
      out->init.key = key;
    }
    out->owner = in->owner();
    out->io_twin = in->io_twin();
    out->alias_of = in->alias_of();
    out->unbatched = in->unbatched();
    out->held_by = in->held_by();
    out->view_of = in->view_of();
    out->view_at = in->view_at();
    return nullptr;
  }

  static tf_status step_at(const fb::Step *in, tf_plan_step *out) {
    if (!in->name())
      return tf_status_new(TF_ERR_INVALID_INPUT, "has no name (a required field)");
    TF_RETURN_IF_ERROR(copy_string(in->name(), "name", &out->name));
    store_enum(&out->op, in->op());
    TF_RETURN_IF_ERROR(read_attrs(in->attrs_type(), in->attrs(), &out->attrs));
    store_enum(&out->phase, in->phase());
    out->inputs = copy_ints(in->inputs());
    out->n_inputs = in->inputs() ? static_cast<int32_t>(in->inputs()->size()) : 0;
    TF_RETURN_IF_ERROR(read_ints(in->outputs(), "outputs", TF_MAX_OUTPUTS, out->outputs, &out->n_outputs));
    out->workspace = in->workspace();
    out->flops = in->flops();
    out->held_by = in->held_by();
    return nullptr;
  }

  // One entry per step; absent only when there are no steps (the C struct holds no count).
  tf_status live_bytes(const Vector<int64_t> *values) {
    uoffset_t n = values ? values->size() : 0;
    if (!vector_aligned(values))
      return tf_status_new(TF_ERR_INVALID_INPUT, "report.live_bytes: misaligned vector (corrupt FlatBuffer)");
    if (n != static_cast<uoffset_t>(plan_->n_steps))
      return tf_status_new(TF_ERR_INVALID_INPUT, "report.live_bytes has %u entries for %d steps; it needs one per step",
                           n, plan_->n_steps);
    plan_->report.live_bytes = allocate<int64_t>(n);
    for (uoffset_t i = 0; i < n; i++)
      plan_->report.live_bytes[i] = values->Get(i);
    return nullptr;
  }

  const char *source_;
  tf_plan *plan_;
};

tf_status decode(const void *data, size_t size, const char *source, tf_plan *plan) {
  AlignedBytes aligned(data, size);
  TF_RETURN_IF_ERROR(check_file(data, size, aligned.bytes(), source, kPlanFile));
  const fb::Plan *root = fb::GetPlan(aligned.bytes());
  TF_RETURN_IF_ERROR(check_version(root->version(), source, kPlanFile));

  plan->loss = plan->loss_scale_seed = plan->overflow_check = -1;
  plan->report.peak_step = -1;
  plan->version = root->version();
  Decoder decoder(source, plan);
  tf_status status = copy_string(root->graph_name(), "graph_name", &plan->graph_name);
  if (!status)
    status = copy_string(root->target(), "target", &plan->target);
  if (!status)
    status = read_fixed(root->region_bytes(), "region_bytes", TF_REGION_COUNT, "region",
                        static_cast<int64_t *>(plan->region_bytes));
  if (status)
    return refuse(status, source);
  plan->alignment = root->alignment();
  TF_RETURN_IF_ERROR(decoder.buffers(root->buffers()));
  TF_RETURN_IF_ERROR(decoder.steps(root->steps(), &plan->steps, &plan->n_steps, "step"));
  TF_RETURN_IF_ERROR(decoder.steps(root->host_steps(), &plan->host_steps, &plan->n_host_steps, "host step"));
  TF_RETURN_IF_ERROR(decoder.host_at(root->host_at()));
  plan->host_bytes = root->host_bytes();
  plan->ranks = root->ranks();
  plan->zero = root->zero();
  plan->micro_steps = root->micro_steps();
  plan->accumulate = root->accumulate();
  plan->micro_batch = root->micro_batch();
  plan->global_batch = root->global_batch();
  TF_RETURN_IF_ERROR(decoder.symbols(root->symbols()));
  plan->training = root->training();
  if (root->training_config())
    read_training(root->training_config(), &plan->training_config);
  plan->loss = root->loss();
  plan->loss_scale_seed = root->loss_scale_seed();
  plan->overflow_check = root->overflow_check();
  store_enum(&plan->matmul_math, root->matmul_math());
  status = copy_string(root->graph_dir(), "graph_dir", &plan->graph_dir);
  if (status)
    return refuse(status, source);
  plan->outputs = copy_ints(root->outputs());
  plan->n_outputs = root->outputs() ? static_cast<int32_t>(root->outputs()->size()) : 0;
  TF_RETURN_IF_ERROR(decoder.report(root->report()));
  TF_RETURN_IF_ERROR(decoder.overhead(root->overhead()));
  return nullptr;
}

// ---- encode: tf_plan -> FlatBuffer ----

class Encoder : public EncoderBase<tf_plan> {
public:
  // Messages name the plan by its graph's name.
  explicit Encoder(const tf_plan *plan) : EncoderBase(plan, plan->graph_name) {}

  tf_status run(void **data, size_t *size) {
    const tf_plan &p = *item_;
    TF_RETURN_IF_ERROR(check_count(p.n_buffers, p.buffers, "buffers"));
    TF_RETURN_IF_ERROR(check_count(p.n_steps, p.steps, "steps"));
    TF_RETURN_IF_ERROR(check_count(p.n_symbols, p.symbol_names, "symbols"));
    TF_RETURN_IF_ERROR(check_count(p.n_symbols, p.symbol_values, "symbol values"));
    TF_RETURN_IF_ERROR(check_count(p.n_outputs, p.outputs, "outputs"));
    std::vector<Offset<fb::Buffer>> buffers;
    TF_RETURN_IF_ERROR(encode_each(
        p.buffers, p.n_buffers, "buffer",
        [&](const tf_plan_buffer &buffer, Offset<fb::Buffer> *out) { return buffer_at(buffer, out); }, &buffers));
    std::vector<Offset<fb::Step>> steps;
    TF_RETURN_IF_ERROR(encode_each(
        p.steps, p.n_steps, "step", [&](const tf_plan_step &step, Offset<fb::Step> *out) { return step_at(step, out); },
        &steps));
    std::vector<Offset<fb::Step>> host_steps;
    TF_RETURN_IF_ERROR(check_count(p.n_host_steps, p.host_steps, "host steps"));
    TF_RETURN_IF_ERROR(check_count(p.n_host_steps, p.host_at, "host step positions"));
    TF_RETURN_IF_ERROR(encode_each(
        p.host_steps, p.n_host_steps, "host step",
        [&](const tf_plan_step &step, Offset<fb::Step> *out) { return step_at(step, out); }, &host_steps));
    std::vector<Offset<fb::BoundSymbol>> symbols;
    for (int32_t i = 0; i < p.n_symbols; i++)
      symbols.push_back(fb::CreateBoundSymbol(fbb_, string(p.symbol_names[i]), p.symbol_values[i]));
    Offset<fb::TrainingConfig> training;
    TF_RETURN_IF_ERROR(write_training(fbb_, p.training_config, &training));
    Offset<fb::Report> report;
    TF_RETURN_IF_ERROR(report_of(p.report, &report));
    std::vector<Offset<fb::OverheadPart>> overhead;
    TF_RETURN_IF_ERROR(overhead_of(p.overhead, &overhead));
    auto regions = fbb_.CreateVector(static_cast<const int64_t *>(p.region_bytes), TF_REGION_COUNT);
    auto root =
        fb::CreatePlan(fbb_, p.version, string(p.graph_name), string(p.target), p.alignment, regions,
                       fbb_.CreateVector(buffers), fbb_.CreateVector(steps), p.micro_steps, p.accumulate, p.micro_batch,
                       p.global_batch, fbb_.CreateVector(symbols), p.training, training, p.loss,
                       fbb_.CreateVector(p.outputs, static_cast<size_t>(p.n_outputs)), report,
                       overhead.empty() ? Offset<Vector<Offset<fb::OverheadPart>>>() : fbb_.CreateVector(overhead),
                       p.loss_scale_seed, p.overflow_check, static_cast<fb::DType>(p.matmul_math), string(p.graph_dir),
                       host_steps.empty() ? Offset<Vector<Offset<fb::Step>>>() : fbb_.CreateVector(host_steps),
                       p.host_bytes, p.ranks > 1 ? p.ranks : 1,
                       host_steps.empty() ? Offset<Vector<int32_t>>()
                                          : fbb_.CreateVector(p.host_at, static_cast<size_t>(p.n_host_steps)),
                       p.zero);
    fb::FinishPlanBuffer(fbb_, root);
    return copy_finished(fbb_, kPlanFile, data, size);
  }

private:
  // NULL stays absent, so that the decoder's "has no name" is reachable from a C test.
  Offset<flatbuffers::String> string(const char *text) {
    return text ? fbb_.CreateString(text) : Offset<flatbuffers::String>();
  }

  template <typename T> static tf_status check_count(int32_t count, const T *items, const char *what) {
    if (count < 0 || (count > 0 && !items))
      return tf_status_new(TF_ERR_INVALID_ARGUMENT, "the plan has %d %s%s", count, what,
                           count > 0 ? " but no array holding them" : "");
    return nullptr;
  }

  tf_status buffer_at(const tf_plan_buffer &b, Offset<fb::Buffer> *out) {
    uint32_t role = 0, region = 0, dtype = 0, init_kind = 0;
    TF_RETURN_IF_ERROR(fit_enum(load_enum(b.role), "role", 255, &role));
    TF_RETURN_IF_ERROR(fit_enum(load_enum(b.region), "region", 255, &region));
    TF_RETURN_IF_ERROR(fit_enum(load_enum(b.dtype), "dtype", 255, &dtype));
    TF_RETURN_IF_ERROR(fit_enum(load_enum(b.init.kind), "init kind", 255, &init_kind));
    TF_RETURN_IF_ERROR(check_rank(b.rank, "the shape"));
    auto shape = fbb_.CreateVector(b.shape, static_cast<size_t>(b.rank));
    Offset<fb::Initializer> init;
    if (init_kind != fb::InitKind_none || b.init.a != 0 || b.init.b != 0 || b.init.file || b.init.key)
      init = fb::CreateInitializer(fbb_, static_cast<fb::InitKind>(init_kind), b.init.a, b.init.b, string(b.init.file),
                                   string(b.init.key));
    *out = fb::CreateBuffer(fbb_, string(b.name), static_cast<fb::Role>(role), static_cast<fb::Region>(region),
                            b.offset, b.bytes, static_cast<fb::DType>(dtype), shape, b.first_step, b.last_step, init,
                            b.owner, b.io_twin, b.alias_of, b.unbatched, b.held_by, b.view_of, b.view_at);
    return nullptr;
  }

  tf_status step_at(const tf_plan_step &s, Offset<fb::Step> *out) {
    uint32_t op = 0, phase = 0;
    TF_RETURN_IF_ERROR(fit_enum(load_enum(s.op), "op", 0xffff, &op));
    TF_RETURN_IF_ERROR(fit_enum(load_enum(s.phase), "phase", 255, &phase));
    TF_RETURN_IF_ERROR(check_count(s.n_inputs, s.inputs, "inputs"));
    if (s.n_outputs < 0 || s.n_outputs > TF_MAX_OUTPUTS)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT, "has %d outputs; the format holds 0..%d", s.n_outputs,
                           TF_MAX_OUTPUTS);
    fb::Attrs kind = fb::Attrs_NONE;
    Offset<void> attrs;
    TF_RETURN_IF_ERROR(write_attrs(fbb_, s.attrs, &kind, &attrs));
    auto inputs = fbb_.CreateVector(s.inputs, static_cast<size_t>(s.n_inputs));
    auto outputs = fbb_.CreateVector(s.outputs, static_cast<size_t>(s.n_outputs));
    *out = fb::CreateStep(fbb_, string(s.name), static_cast<fb::Op>(op), kind, attrs, static_cast<fb::Phase>(phase),
                          inputs, outputs, s.workspace, s.flops, s.held_by);
    return nullptr;
  }

  tf_status overhead_of(const tf_device_overhead &o, std::vector<Offset<fb::OverheadPart>> *out) {
    if (o.n_parts < 0 || o.n_parts > TF_MAX_OVERHEAD_PARTS)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT, "the plan has %d overhead parts; the format holds 0..%d", o.n_parts,
                           TF_MAX_OVERHEAD_PARTS);
    for (int32_t i = 0; i < o.n_parts; i++) {
      const tf_overhead_part &part = o.parts[i];
      if (memchr(part.name, 0, sizeof(part.name)) == nullptr || memchr(part.source, 0, sizeof(part.source)) == nullptr)
        return tf_status_new(TF_ERR_INVALID_ARGUMENT, "overhead part %d: name or source is not terminated", i);
      out->push_back(
          fb::CreateOverheadPart(fbb_, fbb_.CreateString(part.name), part.bytes, fbb_.CreateString(part.source)));
    }
    return nullptr;
  }

  tf_status report_of(const tf_plan_report &r, Offset<fb::Report> *out) {
    if (item_->n_steps > 0 && !r.live_bytes)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT, "the report has no live_bytes for the plan's %d steps",
                           item_->n_steps);
    Offset<Vector<int64_t>> live;
    if (r.live_bytes)
      live = fbb_.CreateVector(r.live_bytes, static_cast<size_t>(item_->n_steps));
    auto roles = fbb_.CreateVector(static_cast<const int64_t *>(r.role_bytes), TF_ROLE_COUNT);
    auto flops = fbb_.CreateVector(static_cast<const double *>(r.flops), TF_PHASE_COUNT);
    *out = fb::CreateReport(fbb_, roles, r.arena_lower_bound, r.arena_naive, r.peak_step, live, flops, string(r.notes));
    return nullptr;
  }
};

} // namespace

extern "C" tf_status tf_plan_fb_decode(const void *data, size_t size, const char *source, tf_plan *plan) {
  return decode_file(data, size, source, kPlanFile, plan, decode);
}

extern "C" tf_status tf_plan_fb_encode(const tf_plan *plan, void **data, size_t *size) {
  return encode_file<Encoder>(plan, kPlanFile, data, size);
}

extern "C" tf_status tf_plan_fb_to_json(const void *data, size_t size, char **json) {
  return file_to_json(data, size, kPlanFile, json);
}
