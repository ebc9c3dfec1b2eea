/* Which steps each arena buffer's bytes count at. Buffers joined by alias_of (a chain: a reshape's
 * output on its input, a view; an element-wise output written over an input that dies there) lie on
 * one memory, live from the chain's first step to its last reader. Each step of that union is
 * counted for exactly one member, the earliest written still live, so that sums over buffers count
 * every byte once a step. */
#include <stdbool.h>
#include <stdlib.h>

#include "plan/plan_verify_internal.h"

/* Where each buffer's alias_of chain ends, found once per buffer (a walk stops at a buffer already
 * resolved, so a chain of 100,000 in-place steps is not walked 100,000 times). */
enum { CHAIN_UNKNOWN = 0, CHAIN_ON_PATH, CHAIN_ENDS, CHAIN_BROKEN };

/* Resolves the chain from arena buffer `id`: every buffer on the walk gets root[] = the buffer
 * without alias_of that ends it, or, when the chain leaves the plan, leaves the arena or loops (a
 * plan the verifier refuses), itself. `path` has room for every buffer. */
static void resolve_chain(const tf_plan *plan, int32_t id, int32_t *root, unsigned char *state, int32_t *path) {
  int32_t n = 0, at = id, end = -1;
  bool broken = false;
  for (;;) {
    path[n++] = at;
    state[at] = CHAIN_ON_PATH;
    int32_t next = plan->buffers[at].alias_of;
    if (next < 0) {
      end = at;
      break;
    }
    if (next >= plan->n_buffers || plan->buffers[next].region != TF_REGION_ARENA || state[next] == CHAIN_ON_PATH ||
        state[next] == CHAIN_BROKEN) {
      broken = true;
      break;
    }
    if (state[next] == CHAIN_ENDS) {
      end = root[next];
      break;
    }
    at = next;
  }
  for (int32_t k = 0; k < n; k++) {
    state[path[k]] = broken ? CHAIN_BROKEN : CHAIN_ENDS;
    root[path[k]] = broken ? path[k] : end;
  }
}

typedef struct chain_member {
  int32_t root, first, id;
} chain_member;

static int by_root_then_first(const void *a, const void *b) {
  const chain_member *x = a, *y = b;
  if (x->root != y->root)
    return x->root < y->root ? -1 : 1;
  if (x->first != y->first)
    return x->first < y->first ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

int32_t *tf_plan_chain_order(const tf_plan *plan, int32_t *root, int32_t *count) {
  *count = 0;
  size_t room = (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1);
  chain_member *members = malloc(sizeof(chain_member) * room);
  int32_t *order = malloc(sizeof(int32_t) * room);
  unsigned char *state = calloc(room, 1);
  if (!members || !order || !state) {
    free(members);
    free(order);
    free(state);
    return NULL;
  }
  for (int32_t id = 0; id < plan->n_buffers; id++)
    root[id] = id;
  int32_t n = 0;
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    if (plan->buffers[id].region != TF_REGION_ARENA)
      continue;
    if (state[id] == CHAIN_UNKNOWN)
      resolve_chain(plan, id, root, state, order); /* order is free until the sort below */
    members[n++] = (chain_member){root[id], plan->buffers[id].first_step, id};
  }
  free(state);
  qsort(members, (size_t)n, sizeof(chain_member), by_root_then_first);
  for (int32_t i = 0; i < n; i++)
    order[i] = members[i].id;
  free(members);
  *count = n;
  return order;
}

tf_status tf_plan_counted_steps(const tf_plan *plan, int32_t *from, int32_t *to) {
  if (!plan || !from || !to)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "tf_plan_counted_steps: plan, from and to must not be NULL");
  int32_t *root = malloc(sizeof(int32_t) * (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1));
  int32_t n = 0, *order = root ? tf_plan_chain_order(plan, root, &n) : NULL;
  if (!order) {
    free(root);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "counting the live steps of %d buffers: out of host memory",
                         plan->n_buffers);
  }
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    from[id] = 0;
    to[id] = -1;
  }
  /* Within a chain, by first step: each member counts the steps after those already counted. */
  int32_t covered = -1;
  for (int32_t k = 0; k < n; k++) {
    const tf_plan_buffer *b = &plan->buffers[order[k]];
    if (k == 0 || root[order[k]] != root[order[k - 1]])
      covered = b->first_step - 1;
    from[order[k]] = b->first_step > covered + 1 ? b->first_step : covered + 1;
    to[order[k]] = b->last_step;
    if (b->last_step > covered)
      covered = b->last_step;
  }
  free(order);
  free(root);
  return NULL;
}
