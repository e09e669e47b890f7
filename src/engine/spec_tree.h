/* The shape of a tree of draft tokens (Medusa's sparse tree, vLLM's
 * "speculative_token_tree"): node j is candidate rank[j] of head depth[j]
 * (0 = the head that guesses the token after the next one), a child of node
 * parent[j] (-1: of the sequence's last token). Nodes are in breadth-first
 * order, every parent before its children, so the first m nodes of a tree
 * are a tree too (what the scheduler keeps when a step's token budget is
 * short). Every step each speculating sequence fills the same shape with
 * its own candidates; the engine verifies all of its nodes in one forward
 * pass (fwd_batch.tree) and keeps the longest path the target agrees with. */
#ifndef CLLM_ENGINE_SPEC_TREE_H
#define CLLM_ENGINE_SPEC_TREE_H

#include "engine/spec.h"

#include <stdbool.h>
#include <stdint.h>

/* Candidates per head a tree may name (ranks 0..7). */
#define SPEC_TREE_MAX_RANK 8

typedef struct {
    int n;
    int8_t depth[SPEC_MAX_TOKENS];
    int8_t rank[SPEC_MAX_TOKENS];
    int8_t parent[SPEC_MAX_TOKENS];
} spec_tree;

/* Parses vLLM's and Medusa's notation, a list of paths of candidate ranks
 * from the root: "[(0,), (1,), (0, 0), (0, 1), (1, 0), (0, 0, 0)]" (the
 * top two guesses of the first head, then the top two of the second after
 * the first's best, ...). Every path's prefix must be listed before it; at
 * most max_nodes paths are kept, in breadth-first order. -1 with err_get()
 * naming the problem: malformed text, a path listed twice, a path before
 * its prefix, a rank past SPEC_TREE_MAX_RANK - 1, more than SPEC_MAX_TOKENS
 * paths. */
int spec_tree_parse(const char *text, int max_nodes, spec_tree *t);

/* The n_nodes-node tree with the largest expected accepted length for
 * heads whose candidates are right with the probabilities the heads' file
 * records: head d's best with top1[d], each of its next four with a quarter
 * of top5[d] - top1[d]. A path's chance is the product along it (heads taken
 * as independent, as Medusa's tree search does), the expected length the
 * sum over nodes, so the best tree is the n_nodes most likely paths; a
 * child is never likelier than its parent, and ties go to the shorter path,
 * then the lower ranks, so those paths are a tree. At most n_heads deep. */
void spec_tree_auto(const float *top1, const float *top5, int n_heads, int n_nodes, spec_tree *t);

/* Draws the token of the target's logits row `row` (0: the row of the
 * sequence's last token; 1 + j: draft j's) as without drafts, or < 0 (an
 * error); sets *stop when that token ends the sequence. */
typedef int32_t (*spec_row_sampler)(void *user, int row, bool *stop);

/* Verification of n drafts tok[j], draft j a child of draft parent[j] (-1:
 * of the last token; parent NULL: a chain, j - 1), parents first: from the
 * last token's row, each row's token is sampled as without drafts, and the
 * walk goes on to the row of the child holding that token while one does
 * (and the sequence has not stopped). For one-hot drafts that is the
 * standard rejection rule, and over a tree SpecInfer's rule for several
 * drafts of one position: every token emitted is a sample of the target's
 * distribution. The accepted drafts go into path; returns their count. */
int spec_walk(int n, const int32_t *tok, const int8_t *parent, spec_row_sampler sample, void *user,
              int *path);

/* Deepest node's depth + 1. */
int spec_tree_depth(const spec_tree *t);

#endif
