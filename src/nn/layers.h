/* nn/layers — the numeric kernels, as free functions over raw float buffers.
 *
 * Shape letters, fixed for the whole project:
 *   B batch, C input channels, H/W input height/width, OC output channels,
 *   OH/OW output height/width, KH/KW kernel, IN/OUT dense fan-in/fan-out,
 *   K number of classes. Activations are batch-major: (B, C, H, W) or (B, IN).
 *
 * Backward functions overwrite (not accumulate) parameter gradients; a NULL
 * input-gradient pointer skips that product (the first layer needs none).
 */
#ifndef DSGD_LAYERS_H
#define DSGD_LAYERS_H

#include <stdint.h>

/* out = inp · wᵀ + b (dense.c), through a workspace of dense_ws_size
 * floats that holds nothing between calls; with relu, the ReLU of that,
 * the same bits as relu_forward after it */
long dense_ws_size(int B, int IN, int OUT);
void dense_forward(float *out,        /* (B, OUT) */
                   float *ws,         /* dense_ws_size(B, IN, OUT) floats */
                   const float *inp,  /* (B, IN) */
                   const float *w,    /* (OUT, IN) */
                   const float *b,    /* (OUT) */
                   int B, int IN, int OUT, int relu);
/* The first of the rows of a dense layer's weights that thread t of T
 * computes in forward and in the weight gradient at batch B: thread t has
 * [dense_owner_row(t), dense_owner_row(t + 1)), every step the same, and
 * the bias gradient is thread T − 1's (dense.c); OUT for t = T. Below
 * the size worth sharing, or on one thread, thread 0 has every row; -1:
 * the layer's gradients go to the BLAS, in pieces of its inputs. */
long dense_owner_row(int B, int IN, int OUT, int T, int t);
/* The thread that computes that layer's bias gradient. */
int dense_bias_owner(int B, int IN, int OUT, int T);
/* dw = doutᵀ · inp, db = dout's sums over the batch, dinp = dout · w;
 * with relu_in (inp is a ReLU's output), dinp is taken back through that
 * ReLU too: inp > 0 ? dinp : 0, the same bits as relu_backward after it */
void dense_backward(float *dinp,       /* (B, IN) or NULL */
                    float *dw,         /* (OUT, IN) */
                    float *db,         /* (OUT) */
                    const float *dout, /* (B, OUT) */
                    const float *inp,  /* (B, IN) */
                    const float *w,    /* (OUT, IN) */
                    int B, int IN, int OUT, int relu_in);

/* Convolution geometry shared by conv2d and pooling. */
typedef struct conv_geom {
    int B, C, H, W;      /* input */
    int OC, KH, KW;      /* kernel (OC unused by pooling) */
    int stride, pad;
    int OH, OW;          /* derived by conv_geom_init */
} conv_geom_t;

/* Fills OH/OW; returns -1 if the output would be empty. */
int conv_geom_init(conv_geom_t *g);
/* Floats of col workspace conv2d needs: a zero-padded copy of the input
 * plus per-sample scratch (see conv.c). */
long conv_col_size(const conv_geom_t *g);

/* col is a workspace of conv_col_size(g) floats, kept from forward to
 * backward. b and db may be NULL: a convolution without bias.
 * One input channel: direct convolution; otherwise per-sample im2col + sgemm. */
void conv2d_forward(float *out,        /* (B, OC, OH, OW) */
                    float *col,        /* conv_col_size(g) workspace, kept for backward */
                    const float *inp,  /* (B, C, H, W) */
                    const float *w,    /* (OC, C·KH·KW) */
                    const float *b,    /* (OC) */
                    const conv_geom_t *g);
/* col must still hold what the forward pass of this input left there. */
void conv2d_backward(float *dinp,       /* (B, C, H, W) or NULL */
                     float *dw,         /* (OC, C·KH·KW) */
                     float *db,         /* (OC) */
                     float *col,        /* conv_col_size(g) workspace from forward */
                     const float *dout, /* (B, OC, OH, OW) */
                     const float *w,    /* (OC, C·KH·KW) */
                     const conv_geom_t *g);
/* The same with the padded input apart from the rest of the workspace:
 * pad (conv_pad_size(g) floats) is written by forward and read by
 * backward; work (conv_col_size(g) − conv_pad_size(g) floats) is scratch
 * that several layers may share. moments (NULL: none) receives
 * bn_plane_moments of each output plane, (B, OC, 2), for a batch
 * normalization that follows. */
long conv_pad_size(const conv_geom_t *g);
void conv2d_forward_ws(float *out, float *pad, float *work, const float *inp,
                       const float *w, const float *b, double *moments, const conv_geom_t *g);
void conv2d_backward_ws(float *dinp, float *dw, float *db, const float *pad, float *work,
                        const float *dout, const float *w, const conv_geom_t *g);
/* Whether conv2d_backward_ws_add can add its input gradient to what dinp
 * holds (the Winograd form: its output writer adds, out + value), and that
 * call: a second reader's gradient without a buffer and an added pass. */
int conv2d_dinp_adds(const conv_geom_t *g);
void conv2d_backward_ws_add(float *dinp, float *dw, float *db, const float *pad, float *work,
                            const float *dout, const float *w, const conv_geom_t *g);
/* Planes of H×W values stored padded: each plane HP·WP floats, its row r
 * at (r + pad)·WP + pad, zeros around. */
typedef struct plane_pad {
    int H, W, pad;
    long HP, WP;
} plane_pad_t;
/* Where conv2d_backward_ws's output gradient may be handed over already
 * padded, in the convolution's own layout: the start of work, laid out as
 * *pp says, for (B, OC) planes; NULL where the convolution takes its output
 * gradient as it is (every path but the flat one). A producer that writes
 * it there (bn_backward's dpad) saves the pass that copies it in; it then
 * calls conv2d_backward_ws with dout NULL, before anything else uses work. */
float *conv2d_dout_padded(plane_pad_t *pp, float *work, const conv_geom_t *g);
/* How conv2d_forward_ws's input may be handed over already padded, in the
 * convolution's own layout: its (B, C) planes written into pad as *pp
 * says, zeros around them; 0 where it cannot (a 1x1 convolution at a
 * stride above 1 without padding keeps its input subsampled). A producer
 * that writes it there (bn_forward_train's bn_out_t.pad) saves the pass that
 * copies it in; the convolution is then called with inp NULL. */
int conv2d_in_padded(plane_pad_t *pp, const conv_geom_t *g);

/* Locally connected layer (lc.c): conv2d's geometry, but untied weights,
 * one (OC, C·KH·KW) filter bank per output position, and a bias per
 * position and channel. col is a workspace of lc_col_size(g) floats; it
 * carries nothing from forward to backward, which reads the input again. */
long lc_col_size(const conv_geom_t *g);
void lc_forward(float *out,        /* (B, OC, OH, OW) */
                float *col,        /* lc_col_size(g) workspace */
                const float *inp,  /* (B, C, H, W) */
                const float *w,    /* (OH·OW, OC, C·KH·KW) */
                const float *b,    /* (OC, OH·OW) */
                const conv_geom_t *g);
void lc_backward(float *dinp,       /* (B, C, H, W) or NULL */
                 float *dw,         /* (OH·OW, OC, C·KH·KW) */
                 float *db,         /* (OC, OH·OW) */
                 float *col,        /* lc_col_size(g) workspace */
                 const float *dout, /* (B, OC, OH, OW) */
                 const float *inp,  /* (B, C, H, W) */
                 const float *w,    /* (OH·OW, OC, C·KH·KW) */
                 const conv_geom_t *g);

/* The same on the output positions of rect r only, for a layer whose
 * weights and biases hold the positions of block blk ⊇ r alone (spatial
 * model parallelism): w is (bh·bw, OC, C·KH·KW) and b (OC, bh·bw) over
 * blk's bh×bw positions, while out, dout, inp and dinp keep the whole
 * layer's shape. lc_backward_rect adds into dinp (it clears nothing). */
typedef struct lc_rect { int y0, y1, x0, x1; } lc_rect_t;
void lc_forward_rect(float *out, float *col, const float *inp, const float *w, const float *b, const conv_geom_t *g,
                     lc_rect_t blk, lc_rect_t r);
void lc_backward_rect(float *dinp, float *dw, float *db, float *col, const float *dout, const float *inp,
                      const float *w, const conv_geom_t *g, lc_rect_t blk, lc_rect_t r);

/* Max pooling with window KH×KW; argmax holds the flat input index. */
void maxpool_forward(float *out, int32_t *argmax, const float *inp, const conv_geom_t *g);
void maxpool_backward(float *dinp, const float *dout, const int32_t *argmax, const conv_geom_t *g);
/* ReLU followed by max pooling, fused (bit-identical to the two in turn);
 * backward takes the pooled output to know where the ReLU passed. */
void maxpool_relu_forward(float *out, int32_t *argmax, const float *inp, const conv_geom_t *g);
void maxpool_relu_backward(float *dinp, const float *dout, const float *out, const int32_t *argmax,
                           const conv_geom_t *g);

/* Batch normalization over channels of (B, C, HW) activations, PyTorch's
 * BatchNorm2d (bn.c); relu = 1 fuses a following ReLU. Training mode uses
 * the batch's statistics, keeps mean and 1/σ for backward, and moves the
 * running statistics by momentum (variance unbiased there).
 *
 * sync (NULL: this batch alone) normalizes the batches of every replica
 * together, as if they were one (--sync-bn): the forward pass merges the
 * replicas' per-channel sums, the backward pass their gradient sums, each
 * through one gather that every replica makes in the same order. */
typedef struct bn_sync {
    /* Collect n doubles from every replica into all (replicas × n), replica
     * by replica; return the number of replicas. */
    int (*gather)(void *ctx, const double *mine, double *all, int n);
    void *ctx;
    double *mine;   /* (2·C + 1) for the widest layer */
    double *all;    /* (replicas × (2·C + 1)) */
} bn_sync_t;
/* Where a normalization writes its output, beyond out's plain (B, C, HW)
 * (NULL: that). pad: out's planes padded as it says (H·W = HW), zeros
 * around them, for a convolution that reads them (conv2d_in_padded).
 * add: a residual add that is the output's only reader, fused: out =
 * (x̂·γ + β) + add[same index], and relu (the add's) after the sum; its
 * bits are those of the normalization followed by add_forward. */
typedef struct bn_out {
    const plane_pad_t *pad;
    const float *add;
    float *also;                  /* with add: a copy padded as also_pad says, */
    const plane_pad_t *also_pad;  /* for a convolution that reads the add's output too */
} bn_out_t;
void bn_forward_train(float *out,             /* (B, C, HW) */
                      float *mean,            /* (C) saved for backward */
                      float *invstd,          /* (C) saved for backward */
                      float *run_mean,        /* (C) updated */
                      float *run_var,         /* (C) updated */
                      const float *inp,       /* (B, C, HW) */
                      const float *gamma,     /* (C) */
                      const float *beta,      /* (C) */
                      const double *moments,  /* (B, C, 2) bn_plane_moments of inp's planes, or NULL */
                      double *scratch,        /* (B, C, 2): where they are computed when moments is NULL */
                      int B, int C, int HW, int relu, float momentum, float eps, const bn_sync_t *sync,
                      const bn_out_t *o);
/* m = (Σ x, Σ (x − μ)²) of one plane of n values, as batch normalization
 * merges them (bit for bit whoever calls it) */
void bn_plane_moments(double *m, const float *x, int n);
/* o (NULL: plain): the same in both passes. */
void bn_forward_eval(float *out, const float *run_mean, const float *run_var, const float *inp,
                     const float *gamma, const float *beta, int B, int C, int HW, int relu, float eps,
                     const bn_out_t *o);
/* dinp may be NULL. The fused ReLU's mask is recomputed from inp, mean,
 * invstd, gamma and beta, which must be those of the forward pass. With
 * dpad, dinp's planes are written padded as it says (H·W = HW), zeros
 * around them: a convolution's output gradient (conv2d_dout_padded). */
void bn_backward(float *dinp,          /* (B, C, HW) or NULL */
                 float *dgamma,        /* (C) */
                 float *dbeta,         /* (C) */
                 const float *dout,    /* (B, C, HW) */
                 const float *inp,     /* (B, C, HW) */
                 const float *mean, const float *invstd, const float *gamma, const float *beta,
                 double *scratch,      /* (2·C) */
                 int B, int C, int HW, int relu, const bn_sync_t *sync, const plane_pad_t *dpad);

/* Global average pooling: (B, C, HW) → (B, C). */
void gap_forward(float *out, const float *inp, int B, int C, int HW);
void gap_backward(float *dinp, const float *dout, int B, int C, int HW);

/* The residual add: out = a + b, then ReLU if relu. add_backward writes the
 * gradient of the sum (dout masked by out > 0 when relu), which both
 * inputs receive; dsum may be dout itself. */
void add_forward(float *out, const float *a, const float *b, long n, int relu);
void add_backward(float *dsum, const float *dout, const float *out, long n, int relu);

void relu_forward(float *out, const float *inp, long n);
void relu_backward(float *dinp, const float *dout, const float *out, long n);
void tanh_forward(float *out, const float *inp, long n);
void tanh_backward(float *dinp, const float *dout, const float *out, long n);

/* Numerically stable softmax + cross-entropy. Returns the mean loss over the
 * batch; probs receives the softmax. */
float softmax_xent_forward(float *probs,        /* (B, K) */
                           const float *logits, /* (B, K) */
                           const int32_t *labels, /* (B) */
                           int B, int K);
/* dlogits = (probs − onehot) / B: gradient of the mean loss. */
void softmax_xent_backward(float *dlogits, const float *probs, const int32_t *labels, int B, int K);

#endif
