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

/* out = inp · wᵀ + b */
void dense_forward(float *out,        /* (B, OUT) */
                   const float *inp,  /* (B, IN) */
                   const float *w,    /* (OUT, IN) */
                   const float *b,    /* (OUT) */
                   int B, int IN, int OUT);
void dense_backward(float *dinp,       /* (B, IN) or NULL */
                    float *dw,         /* (OUT, IN) */
                    float *db,         /* (OUT) */
                    const float *dout, /* (B, OUT) */
                    const float *inp,  /* (B, IN) */
                    const float *w,    /* (OUT, IN) */
                    int B, int IN, int OUT);

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
 * backward.
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

/* Max pooling with window KH×KW; argmax holds the flat input index. */
void maxpool_forward(float *out, int32_t *argmax, const float *inp, const conv_geom_t *g);
void maxpool_backward(float *dinp, const float *dout, const int32_t *argmax, const conv_geom_t *g);
/* ReLU followed by max pooling, fused (bit-identical to the two in turn);
 * backward takes the pooled output to know where the ReLU passed. */
void maxpool_relu_forward(float *out, int32_t *argmax, const float *inp, const conv_geom_t *g);
void maxpool_relu_backward(float *dinp, const float *dout, const float *out, const int32_t *argmax,
                           const conv_geom_t *g);

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
