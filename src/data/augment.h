/* data/augment — random crops and horizontal flips of a batch, in place,
 * reproducible per rank and step.
 *
 * crop: the image, zero-padded by P pixels on every side, is cut back to
 *   its size at a random offset in [−P, P]² (torchvision's
 *   RandomCrop(size, padding=P)); P = 4 for images of 32 pixels or more,
 *   2 for smaller ones of at least 16 (Fashion-MNIST's 28×28), else 1.
 *   Pixels are in [0, 1], so the padding is black.
 * flip: mirror left–right with probability 1/2.
 * The random draws of a batch depend only on (seed, rank, step), so a
 * resumed run augments its batches exactly as the uninterrupted run did.
 */
#ifndef DSGD_AUGMENT_H
#define DSGD_AUGMENT_H

#include <stddef.h>
#include <stdint.h>

typedef struct augment {
    int crop, flip;       /* what to apply */
    int pad;              /* crop: P */
    int c, h, w;          /* image shape */
    float *tmp;           /* (c·h·w) one image, owned */
} augment_t;

/* "" or "none" (off), "crop", "flip", "crop,flip" (either order); -1 with
 * a one-line reason on anything else. */
int augment_parse(const char *spec, augment_t *a, char *err, size_t errlen);
/* Sizes the crop for c×h×w images and allocates the scratch image. */
void augment_setup(augment_t *a, int c, int h, int w);
void augment_free(augment_t *a);
static inline int augment_on(const augment_t *a) { return a->crop || a->flip; }
/* x: (B, c·h·w) images, changed in place. */
void augment_batch(const augment_t *a, float *x, int B, uint64_t seed, uint64_t rank, long step);

#endif
