/* The names and shapes of a model's tensors in a checkpoint. Private to
 * src/run. */
#ifndef DSGD_CKPT_TENSORS_H
#define DSGD_CKPT_TENSORS_H

#include <stddef.h>

#include "../nn/model.h"

enum { SHAPE_MAX = 6 };

/* "layerI.KIND.WHAT" of layer i */
void ckpt_tensor_name(char *out, size_t len, const model_t *m, int i, const char *what);
/* a trained parameter's tensor ("layerI.KIND.weight" or ".bias") */
int ckpt_is_param(const char *name);
/* the shape of layer l's weight, of its bias: the number of dimensions */
int ckpt_weight_shape(const layer_t *l, int *shape);
int ckpt_bias_shape(const layer_t *l, int *shape);

#endif
