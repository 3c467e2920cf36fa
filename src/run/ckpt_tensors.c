/* The checkpoint's tensors of a model: their names and shapes, as the
 * file lays them out (checkpoint.c writes them, ckpt_restore.c reads
 * them back). */
#include <stdio.h>
#include <string.h>

#include "ckpt_tensors.h"

void ckpt_tensor_name(char *out, size_t len, const model_t *m, int i, const char *what)
{
    snprintf(out, len, "layer%d.%s.%s", i, layer_kind_name(m->layers[i].kind), what);
}

/* "layerI.KIND.weight" or ".bias": a trained parameter (running statistics
 * are layer tensors too, but not parameters). */
int ckpt_is_param(const char *name)
{
    size_t len = strlen(name);
    return !strncmp(name, "layer", 5) &&
           ((len > 7 && !strcmp(name + len - 7, ".weight")) || (len > 5 && !strcmp(name + len - 5, ".bias")));
}

/* Shape of layer i's weight as PyTorch lays it out (a locally connected
 * layer: a convolution's weight per output position). */
int ckpt_weight_shape(const layer_t *l, int *shape)
{
    if (l->kind == LAYER_LC) {
        shape[0] = l->out_h; shape[1] = l->out_w; shape[2] = l->out_c; shape[3] = l->in_c; shape[4] = l->k; shape[5] = l->k;
        return 6;
    }
    if (l->kind == LAYER_CONV) {
        shape[0] = l->out_c; shape[1] = l->in_c; shape[2] = l->k; shape[3] = l->k;
        return 4;
    }
    shape[0] = l->out_c;
    if (l->kind == LAYER_BN) return 1;   /* γ per channel */
    shape[1] = l->in_c * l->in_h * l->in_w;
    return 2;
}

/* Shape of its bias: one per output unit, (OC, OH, OW) for a locally
 * connected layer. */
int ckpt_bias_shape(const layer_t *l, int *shape)
{
    if (l->kind == LAYER_LC) { shape[0] = l->out_c; shape[1] = l->out_h; shape[2] = l->out_w; return 3; }
    shape[0] = (int)l->b_len;
    return 1;
}
