/* Images for vision-language models: decoding (stb_image) to 8-bit RGB,
 * resizing as PIL's Image.resize does it, and the Hugging Face image
 * processor's rescale and normalize (preprocessor_config.json). */
#ifndef LMC_VISION_H
#define LMC_VISION_H

#include "base/base.h"
#include "base/json.h"

/* Largest image decoded, in pixels (width * height): about 10000 x 10000.
 * Larger headers are refused before any pixel is decoded. */
#define LMC_IMAGE_MAX_PIXELS (100u * 1000u * 1000u)

/* An 8-bit RGB image, rows top to bottom: rgb [height, width, 3] (owned). */
typedef struct lmc_image {
    int32_t width, height;
    uint8_t *rgb;
} lmc_image;

/* Decodes a PNG, JPEG, BMP, GIF (first frame), TGA, PSD, HDR, PIC or PNM
 * image from memory into out, converted to RGB as PIL's convert("RGB")
 * does (gray replicated, alpha dropped, palettes expanded). `what` names
 * the image in errors. Errors: LMC_ERR_FORMAT (not an image, truncated or
 * corrupt data, zero width or height), LMC_ERR_LIMIT (more than
 * LMC_IMAGE_MAX_PIXELS pixels), LMC_ERR_NOMEM. */
lmc_status lmc_image_decode(const uint8_t *data, size_t size, const char *what, lmc_image *out);
/* lmc_image_decode of a file (mapped, not copied); LMC_ERR_IO when it
 * cannot be read, LMC_ERR_FORMAT when it is empty. */
lmc_status lmc_image_load(const char *path, lmc_image *out);
void lmc_image_free(lmc_image *im);

/* PIL's resampling filters (Image.Resampling values), as the processors'
 * "resample" key holds them. */
enum { LMC_RESAMPLE_NEAREST = 0, LMC_RESAMPLE_BILINEAR = 2, LMC_RESAMPLE_BICUBIC = 3 };

/* Whose resize to reproduce: PIL's Image.resize (transformers 4's image
 * processors, and 5's *ImageProcessorPil), or torchvision's resize with
 * antialias on uint8 tensors (transformers 5's default image processors),
 * which is PIL's algorithm with other fixed-point weights. */
typedef enum lmc_resize_backend { LMC_RESIZE_PIL = 0, LMC_RESIZE_TORCH = 1 } lmc_resize_backend;

/* out = in resized to width x height as PIL's Image.resize(size, resample)
 * computes it for an RGB image (libImaging/Resample.c): separable
 * convolution, horizontal pass first, the filter widened by the scale
 * when shrinking (antialiasing), fixed-point weights (22 bits; torch's:
 * as many as int16 weights hold) and rounding to uint8 after each pass.
 * resample: LMC_RESAMPLE_BILINEAR or LMC_RESAMPLE_BICUBIC. Errors:
 * LMC_ERR_INVALID_ARG, LMC_ERR_UNSUPPORTED, LMC_ERR_LIMIT, LMC_ERR_NOMEM. */
lmc_status lmc_image_resize(const lmc_image *in, int32_t width, int32_t height, int resample,
                            lmc_resize_backend backend, lmc_image *out);

/* The image processor of a model folder: preprocessor_config.json as
 * transformers' SiglipImageProcessor reads it. */
typedef struct lmc_image_processor {
    bool do_resize;
    int32_t height, width; /* size */
    int resample;
    bool do_rescale;
    double rescale_factor;
    bool do_normalize;
    float mean[3], std[3];
    int32_t image_seq_length; /* tokens per image (0 when absent) */
    /* LMC_RESIZE_TORCH (transformers 5's SiglipImageProcessor, the
     * default) unless image_processor_type names a *Pil processor; the
     * torch backend also fuses rescale into normalize as transformers 5
     * does: (x - mean / rescale_factor) / (std / rescale_factor) */
    lmc_resize_backend backend;
} lmc_image_processor;

/* Reads an image processor from a preprocessor_config.json object; `what`
 * names it in errors (LMC_ERR_FORMAT for wrong types and values,
 * LMC_ERR_UNSUPPORTED for a resample filter other than bilinear/bicubic). */
lmc_status lmc_image_processor_parse(const json_t *j, const char *what, lmc_image_processor *p);
/* dir/preprocessor_config.json; LMC_ERR_NOT_FOUND when absent. */
lmc_status lmc_image_processor_load(const char *dir, lmc_image_processor *p);

/* Output size of the processor for an image: size when do_resize, else
 * the image's own. */
void lmc_image_processor_output_size(const lmc_image_processor *p, const lmc_image *im,
                                     int32_t *height, int32_t *width);
/* pixel_values [3, height, width] (channels first) of an image, as the
 * processor computes them: resize, then (PIL backend) x * rescale_factor
 * in double stored as float and (x - mean) / std in float, or (torch
 * backend, both steps on) (x - m) / s in float with m = mean *
 * (1 / rescale_factor), s = std * (1 / rescale_factor) in float. out
 * holds 3 * height * width floats (lmc_image_processor_output_size). */
lmc_status lmc_image_preprocess(const lmc_image_processor *p, const lmc_image *im, float *out);

#endif
