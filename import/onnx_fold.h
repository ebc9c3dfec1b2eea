/* The values stage's arithmetic (import/stages.txt): folding ONNX operators whose inputs are all
 * known at import time (import/onnx_fold.c). Each function returns a new known value in *out (the
 * caller frees it with ox_known_free()); those whose result can outgrow their inputs refuse, before
 * computing it, one of more than `room` elements (ox_fold_room). */
#ifndef TIGHTFIT_IMPORT_ONNX_FOLD_H
#define TIGHTFIT_IMPORT_ONNX_FOLD_H

#include "import/onnx_values.h"

/* a op b with numpy broadcasting; op is '+', '-', '*', '/', '=' (Equal), '>' (Greater), '<' (Less),
 * 'G' (GreaterOrEqual), 'L' (LessOrEqual), '%' / 'f' (Mod), 'M' / 'm' (Max, Min), 'A' / 'O' / 'X'
 * (And, Or, Xor) or '^' (Pow). */
tf_status ox_fold_binary(char op, const ox_known *a, const ox_known *b, int64_t room, ox_known **out) TF_MUST_USE;
/* cond ? x : y elementwise over known values (numpy broadcasting of the three). */
tf_status ox_fold_where(const ox_known *cond, const ox_known *x, const ox_known *y, int64_t room,
                        ox_known **out) TF_MUST_USE;
/* x converted to `to` (floats truncate towards zero when cast to integers). */
tf_status ox_fold_cast(const ox_known *x, tf_dtype to, ox_known **out) TF_MUST_USE;
/* x with the same elements and a new shape of the same element count; NULL when it differs. */
ox_known *ox_fold_copy(const ox_known *x, int32_t rank, const int64_t *shape);
/* x reduced over the axes marked in `reduced` ('+' sum, '*' product, 'M' max, 'm' min; integers exact): the
 * reduced axes kept as 1 or dropped. */
tf_status ox_fold_reduce(const ox_known *x, const bool *reduced, bool keepdims, char op, ox_known **out) TF_MUST_USE;
/* ONNX's ScatterND of known values (reduction 'none' '=', 'add' '+', 'mul' '*', 'max' 'M', 'min' 'm'):
 * data with each slice that `indices` (integers, [..., k]) names set from or reduced with `updates`. */
tf_status ox_fold_scatter_nd(const ox_known *data, const ox_known *indices, const ox_known *updates, char reduction,
                             ox_known **out) TF_MUST_USE;
/* x[start:end:step] along `axis` (0 <= axis < rank) with ONNX's Slice clamping of start and end, for
 * a positive step and a negative one (torch's export reverses Pad's pads with step -1); step != 0. */
tf_status ox_fold_slice(const ox_known *x, int32_t axis, int64_t start, int64_t end, int64_t step,
                        ox_known **out) TF_MUST_USE;
/* ONNX Gather of `indices` along `axis` of `data`. */
tf_status ox_fold_gather(const ox_known *data, const ox_known *indices, int32_t axis, int64_t room,
                         ox_known **out) TF_MUST_USE;
/* ONNX Concat of n parts along `axis`. */
tf_status ox_fold_concat(const ox_known *const *parts, int32_t n, int32_t axis, int64_t room,
                         ox_known **out) TF_MUST_USE;

/* Whether integer value x holds a symbolic size (a multiple of N) anywhere. */
bool ox_known_has_symbol(const ox_known *x);
/* x with its axes permuted: axis i of the result is axis perm[i] of x. */
tf_status ox_fold_transpose(const ox_known *x, const int32_t *perm, ox_known **out) TF_MUST_USE;
/* x broadcast with `shape` (ONNX Expand: numpy rules, each axis the larger of the two). */
tf_status ox_fold_expand(const ox_known *x, int32_t rank, const int64_t *shape, int64_t room,
                         ox_known **out) TF_MUST_USE;
/* a @ b (numpy matmul of rank 2 or more, batch axes broadcast), each sum in double, stored as f32
 * when the operands are f32. */
tf_status ox_fold_matmul(const ox_known *a, const ox_known *b, int64_t room, ox_known **out) TF_MUST_USE;
/* function(x) element by element, a float of x's type (f32 for integers), stored as f32 when f32. */
tf_status ox_fold_unary(const ox_known *x, double (*function)(double), ox_known **out) TF_MUST_USE;

#endif
