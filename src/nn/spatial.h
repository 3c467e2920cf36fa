/* nn/spatial — spatial model parallelism of lc models: the M partitions of
 * a replica form a Gy×Gx grid, and each computes one rectangular block of
 * every locally connected layer's output positions. Internal to nn
 * (model.c calls it; the halo messages go through model_part_t's hooks). */
#ifndef DSGD_SPATIAL_H
#define DSGD_SPATIAL_H

#include <stddef.h>

#include "model.h"

/* The grid of M blocks: Gy rows of Gx, Gy the largest divisor of M not
 * above √M (2: 1×2, 4: 2×2, 8: 2×4). */
void spatial_grid(int M, int *gy, int *gx);
/* -1 with a one-line reason if the grid does not tile some locally
 * connected layer of the n planned layers L. */
int spatial_check(const layer_t *L, int n, int M, const char *spec, char *err, size_t errlen);
/* Output positions of lc layer i that partition q of M computes: the grid
 * cell's share of the pooled output, times the pooling (the last row and
 * column of blocks also take what the pooling drops). */
lc_rect_t spatial_block(const layer_t *L, int n, int i, int q, int M);
/* Cut lc layer i of a model being built down to its block (w_len, b_len, blk). */
void spatial_cut(model_t *m, int i);
/* After the buffers: the halo plans and the classifier's gather. */
void spatial_setup(model_t *m);
void spatial_free(model_t *m);
/* Forward and backward of lc layer i on this partition's block, with the
 * halo exchange overlapped with the block's interior. inp is the layer
 * below's output (its halo is filled in here); dinp is added to. */
void spatial_lc_forward(model_t *m, int i, float *inp, int B);
void spatial_lc_backward(model_t *m, int i, float *dinp, const float *inp, int B);
/* 1 if layer i is an lc model's classifier (a dense layer on a flatten):
 * split by its inputs, each partition the features of its own block. */
int spatial_classifier(const layer_t *L, int n, int i);
void spatial_cut_classifier(model_t *m, int i);
/* Parameters of classifier layer i that partition q holds. */
size_t spatial_classifier_nparams(const model_t *m, int i, int q);
/* The classifier: logits from this partition's features, summed over the
 * replica (part.sum); backward: its weight columns' gradient and its
 * block's input gradient, with no message. */
void spatial_dense_forward(model_t *m, int i, const float *inp, int B);
void spatial_dense_backward(model_t *m, int i, float *dinp, int B);
/* The activation (relu, tanh) and max pooling above an lc layer, on this
 * partition's block only; relu: a ReLU fused into the pooling. */
void spatial_act(model_t *m, int i, const float *inp, float *dinp, int B);   /* dinp NULL: forward */
void spatial_pool_forward(model_t *m, int i, const float *inp, int B, int relu);
void spatial_pool_backward(model_t *m, int i, float *dinp, int B, int relu);
#endif
