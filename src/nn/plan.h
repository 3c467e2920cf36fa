/* nn/plan — a model spec parsed into layers with shapes but no buffers,
 * and the layers' geometry (plan.c); model.c builds a model from it,
 * passes.c runs its forward and backward passes, and graph.c lays out a
 * residual network's output gradients. Internal to nn. */
#ifndef DSGD_PLAN_H
#define DSGD_PLAN_H

#include <stddef.h>

#include "model.h"

enum { PLAN_MAX = 1024, PLAN_PREV = -2 };

typedef struct plan {
    int n;
    int graph;          /* some layer reads another than the one below it */
    int c, h, w;        /* running output shape: the next layer's input */
    int in_c, in_h, in_w;
    int next_src;       /* the next layer's input: PLAN_PREV (the layer below), -1 (the model input) or a layer */
    layer_t l[PLAN_MAX];
} plan_t;

/* Parse spec for inputs c×h×w and `classes` classes into p; -1 with a
 * one-line reason in err. */
int plan_build(plan_t *p, const char *spec, int c, int h, int w, int classes, char *err, size_t errlen);
/* Append a layer reading the running shape; -1 with err set if it does not fit. */
int plan_push(plan_t *p, layer_kind_t kind, int out_c, int k, int stride, int pad, char *err, size_t errlen);
/* The next layer reads layer src's output (-1: the model input). */
void plan_from(plan_t *p, int src);

/* A layer's output floats per sample. */
long layer_out_size(const layer_t *l);
/* A convolution's, locally connected layer's or pooling's geometry for a
 * batch of B, computing OC output channels (a partition's share for split
 * convolutions; out_c otherwise). */
conv_geom_t layer_geom(const layer_t *l, int B, int OC);

/* A graph model's output gradients: the layers' douts share as few
 * buffers of `size` floats as the backward pass can live with (graph.c). */
void graph_alloc_douts(model_t *m, size_t size);

/* The forward and backward passes of every model (passes.c). */
const float *passes_forward(model_t *m, const float *x, int B);
void passes_backward(model_t *m, int B);
/* Layer i is a ReLU that the max pooling after it applies (fused: the ReLU
 * layer then neither computes nor stores anything). */
int passes_relu_fused(const model_t *m, int i);
/* Layer i is a ReLU that the dense layer below it applies (dense_forward's
 * relu): a sequential model, not split across ranks. The ReLU's output is
 * then that layer's (no buffer of its own); its backward is its own. */
int passes_relu_in_dense(const model_t *m, int i);
/* The lowest layer with parameters (nlayers if none): no layer below it
 * gets an input gradient. */
int passes_first_param(const model_t *m);
/* Layer i's gradient span (weights and bias) is final: hand it to the
 * paradigm's grad_ready, if any (model.h). */
void passes_grads_ready(const model_t *m, int i);

#endif
