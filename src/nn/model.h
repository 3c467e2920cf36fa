/* nn/model — a model is an ordered list of layers over one flat parameter
 * vector and one flat gradient vector of the same length (docs/design.md,
 * "Principles"). Layers hold offsets into them; every communication and the
 * checkpoint operate on spans of these two buffers.
 *
 * Model specs (stored in metrics and checkpoints):
 *   logreg                       one dense layer
 *   mlp[:H1,H2,...][:tanh]       dense+act per hidden size (default 256,128, relu)
 *   lenet[:tanh]                 conv5x5x6 pad2 → pool2 → conv5x5x16 → pool2 → 120 → 84 → K
 *   resnet[:D,W]                 He et al.'s CIFAR residual network, depth D = 6n+2, base width W
 *                                (default resnet:20,16; plan.c)
 *   lc[:C1,C2,...][:k=K][:s=S][:p=P][:pool=Q]
 *                                DistBelief's image model: locally connected layers of C1, C2, ...
 *                                channels (K×K fields, stride S, zero padding P; default
 *                                lc:8,16:k=3:s=1:p=(K-1)/2), each followed by ReLU and Q×Q max
 *                                pooling (default 2; 1: none), then a dense classifier (plan.c)
 * The input shape and the number of classes come from the dataset.
 *
 * Models with branches (resnet) are graphs: each layer names the layer whose
 * output it reads (src; a residual add also src2), and the backward pass
 * adds the gradients of an output that feeds two layers. Their batch
 * normalization layers keep running statistics in the state vector, one
 * flat vector beside the parameters (not trained, never in the gradient).
 *
 * The model owns every buffer it uses for batches up to max_batch, so the
 * training step never allocates.
 */
#ifndef DSGD_MODEL_H
#define DSGD_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "layers.h"

typedef enum layer_kind {
    LAYER_DENSE, LAYER_CONV, LAYER_MAXPOOL, LAYER_RELU, LAYER_TANH, LAYER_FLATTEN,
    LAYER_BN,      /* batch normalization: weight γ, bias β; running mean and variance in the state vector */
    LAYER_ADD,     /* residual add of src and src2 */
    LAYER_GAP,     /* global average pooling */
    LAYER_LC       /* locally connected: untied weights per output position (lc.c) */
} layer_kind_t;

typedef struct layer {
    layer_kind_t kind;
    int in_c, in_h, in_w;       /* per-sample input shape (dense: in_c = IN, h = w = 1) */
    int out_c, out_h, out_w;    /* per-sample output shape */
    int k, stride, pad;         /* conv / lc / pool */
    size_t w_off, w_len;        /* weights: span of the flat vector */
    size_t b_off, b_len;        /* bias */
    float *out;                 /* (max_batch, out size) activations */
    float *dout;                /* (max_batch, out size) gradient of the loss w.r.t. out */
    int32_t *argmax;            /* maxpool only */
    /* Model parallelism: a dense or conv layer of a partitioned model holds
     * only output units [u_lo, u_hi) of out_c (w_len, b_len are this
     * partition's); out/dout stay whole, gathered from the partitions. */
    int u_lo, u_hi;
    int *pb;                    /* (M+1) partition bounds in floats of one sample's output, or NULL: not split */
    float *lout, *ldout;        /* (max_batch, (u_hi-u_lo)·OH·OW) this partition's outputs and their gradient */
    size_t gw_off, gb_off;      /* the whole layer's weight/bias offsets in the unpartitioned vector */
    /* graph models (model_t.graph) */
    int src, src2;              /* layers whose outputs are the input (and the add's second input); -1: the model input */
    int relu;                   /* bn, add: a ReLU fused after */
    int he;                     /* conv: He-normal init whatever follows */
    size_t s_off, s_len;        /* bn: running mean then running variance, a span of the state vector */
    float *aux;                 /* bn: (2, C) batch mean and 1/σ kept for backward */
    int nuse;                   /* layers that read this output */
    int dwrites;                /* backward: input gradients written into dout so far */
    /* spatial model parallelism (lc models, spatial.c): a locally connected
     * layer of a partitioned model holds the weights and biases of the
     * output positions in blk only, w as (bh·bw, OC, C·KH·KW) and b as
     * (OC, bh·bw); out/dout keep the whole shape. blk is the whole output
     * when the layer is not split. */
    lc_rect_t blk;
} layer_t;

/* Model parallelism within a replica (DistBelief; docs/algorithms.md §11):
 * M ranks each hold a slice of the output units of every dense and conv
 * layer, or, in an lc model, a rectangular block of every locally connected
 * layer's output positions (a grid of Gy×Gx blocks; spatial.c), exchanging
 * with their grid neighbours only the halo their receptive fields read.
 * Forward: each computes its slice, gather() assembles the whole output on
 * every rank. Backward: each computes its input-gradient contribution, sum()
 * adds them. Weights never move. The hooks come from the layer above (nn
 * never calls MPI). */
typedef struct model_part {
    int index, count;           /* this rank's partition p, and M */
    /* full (B, R) := the partitions' column blocks [pb[q], pb[q+1]), each
     * given by its owner as a contiguous (B, pb[q+1]−pb[q]) block; local is
     * this rank's. */
    void (*gather)(void *ctx, float *full, const float *local, int B, int R, const int *pb);
    void (*sum)(void *ctx, float *buf, long n);   /* in-place sum over the M partitions */
    /* lc models: post n messages, send[j] (nsend[j] floats) to partition
     * peer[j] and recv[j] (nrecv[j] floats) from it, and wait for them all;
     * between the two the caller computes what needs no halo */
    void (*halo_start)(void *ctx, int n, const int *peer, float *const *send, const long *nsend,
                       float *const *recv, const long *nrecv);
    void (*halo_wait)(void *ctx);
    void *ctx;
} model_part_t;

/* A span of the local parameter vector and where it lies in the
 * unpartitioned one (checkpoints and resume assemble the whole model). */
typedef struct model_span {
    size_t off, full_off, len;
} model_span_t;

typedef struct model {
    char spec[128];
    int in_c, in_h, in_w, classes;
    int nlayers;
    layer_t *layers;
    size_t nparams;
    float *params;              /* (nparams) */
    float *grads;               /* (nparams) */
    int max_batch;
    float *col;                 /* im2col workspace, one per conv layer, laid end to end */
    long *col_off;              /* (nlayers) offset of each conv layer's workspace (graph models: its padded input) */
    long col_work_off;          /* graph models: offset of the work area their convolutions share */
    long dense_ws_off;          /* offset of the workspace the dense layers share (dense_ws_size) */
    float *probs;               /* (max_batch, classes) */
    float *dlogits;             /* (max_batch, classes) */
    const float *input;         /* last forward input (not owned) */
    /* Called by model_backward as soon as a layer's gradient span
     * [off, off+len) of grads is final (last layer first), so a paradigm can
     * start communicating it while the layers below are still computing. */
    void (*grad_ready)(void *ctx, size_t off, size_t len);
    void *grad_ctx;
    /* Set by a paradigm that normalizes the replicas' batches together
     * (bsp --sync-bn); NULL: each replica its own batch. */
    const bn_sync_t *bn_sync;
    /* NULL, or 2 per layer that the passes add each layer's forward and
     * backward seconds to (bench_train's layer-by-layer profile; owned by
     * whoever sets it) */
    double *layer_s;
    model_part_t part;          /* count = 1: not partitioned */
    size_t full_nparams;        /* parameters of the unpartitioned model */
    int graph;                  /* layers read src/src2 (resnet), not simply the layer below */
    int training;               /* 1: batch statistics (and running ones updated); 0: running statistics */
    float bn_momentum;          /* running statistics' momentum (PyTorch's 0.1; 1/k averages k batches) */
    size_t nstate;              /* floats of non-trained state (batch-norm running statistics) */
    float *state;               /* (nstate) in the same allocation as params, right after them */
    float *dscratch;            /* graph: input gradient of a second reader, before it is added */
    float **dpool;              /* graph: the buffers the layers' douts share (graph.c) */
    int ndpool;
    float *zbias;               /* graph: gradients of the absent conv biases (discarded) */
    double *bn_moments;         /* graph: (max_batch, widest conv, 2) moments of a conv's output planes for the batch normalization after it */
    struct spatial *spatial;    /* a partitioned lc model's halo plans (spatial.c), or NULL */
} model_t;

/* Check a spec against an input shape without building; on error writes a
 * one-line reason to err and returns -1. */
int model_spec_check(const char *spec, int c, int h, int w, int classes, char *err, size_t errlen);
/* 1 if the spec is a graph model (resnet); 0 otherwise or if it is bad. */
int model_spec_graph(const char *spec);
/* Floats of activation one sample needs in the forward pass (the layers'
 * outputs together) on inputs c×h×w; 0 if the spec is bad. */
double model_spec_act_floats(const char *spec, int c, int h, int w, int classes);
/* The most channels of any batch-normalization layer (0: none). */
int model_bn_channels(const model_t *m);
/* The spans weight decay skips with --weight-decay-bn 0: every batch-norm
 * layer's weight and bias and every other layer's bias, as (off, len)
 * pairs in ascending order (local offsets); returns how many (at most max). */
int model_nodecay_spans(const model_t *m, size_t *out, int max);
/* Which of T threads computes each parameter's gradient at batch B, where
 * the model's layers keep that fixed (dense layers, dense_owner_row):
 * (off, len, thread) triples in ascending order covering every parameter,
 * for the optimizer to update each span on the same thread
 * (optim_cfg_t.owners). Returns how many (at most max), or 0 where that
 * does not hold: one thread, a model split across ranks, a layer of
 * another kind, or a dense layer whose gradients go to the BLAS. */
int model_owner_spans(const model_t *m, int B, int T, size_t *out, int max);
/* Build (dies with a clear message on a bad spec). Parameters are zero until
 * model_init_params. */
model_t *model_create(const char *spec, int c, int h, int w, int classes, int max_batch);
/* The same, holding partition part->index of part->count (NULL or count 1:
 * the whole model). Dies if a split layer has fewer units than partitions
 * (model_part_check says so first). */
model_t *model_create_part(const char *spec, int c, int h, int w, int classes, int max_batch,
                           const model_part_t *part);
/* -1 with a one-line reason if some dense/conv layer has fewer than M units
 * or an lc model's grid of M blocks does not tile a locally connected layer. */
int model_part_check(const char *spec, int c, int h, int w, int classes, int M, char *err, size_t errlen);
/* The spans of the local parameter vector (2 per parameter layer, more for
 * a spatially split lc layer: a weight span per row of its block, a bias
 * span per channel and row); returns how many there are and writes at most
 * max of them (out NULL: count only). */
int model_spans(const model_t *m, model_span_t *out, int max);
/* Parameters partition q of the model's M holds (the partitions' local
 * vectors laid end to end are a permutation of the whole one). */
size_t model_part_nparams(const model_t *m, int q);
void model_free(model_t *m);
/* He-normal for layers followed by ReLU, Xavier-uniform otherwise; zero bias.
 * A partitioned model gets exactly its slice of the unpartitioned values. */
void model_init_params(model_t *m, uint64_t seed);

/* Forward pass on x (B, C·H·W); returns the logits (B, classes). */
const float *model_forward(model_t *m, const float *x, int B);
/* Mean cross-entropy of the last forward pass; fills m->probs. */
float model_loss(model_t *m, const int32_t *labels, int B);
/* Backward from the loss computed by model_loss; fills m->grads. */
void model_backward(model_t *m, const int32_t *labels, int B);
/* In place of forward, loss and backward (dsgd train --compute none): a
 * zero gradient, each layer's span handed to grad_ready in backward's order
 * (last layer first), as model_backward would hand it. */
void model_zero_backward(model_t *m);
/* Number of correct argmax predictions in the last forward pass. */
int model_correct(const model_t *m, const int32_t *labels, int B);
/* Multiply-accumulates per sample in the forward pass (for FLOP figures). */
double model_forward_macs(const model_t *m);
/* FLOPs per sample of one training step as model_backward performs it:
 * 2·MACs forward, 2·MACs for the weight gradient, and 2·MACs for the input
 * gradient of every layer above the first one with parameters (the first
 * computes none). Bias, activation and loss work is not counted. */
double model_train_flops(const model_t *m);

/* Training or evaluation mode (batch normalization); a new model trains. */
static inline void model_set_training(model_t *m, int on) { m->training = on; }
/* The state vector's initial values: running means 0, variances 1. */
void model_init_state(model_t *m);

/* Human-readable layer name for checkpoint tensor names ("dense", "conv"). */
const char *layer_kind_name(layer_kind_t k);

#endif
