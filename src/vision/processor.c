/* The image processor, transformers' SiglipImageProcessor in either
 * backend: convert to RGB and resize (resize.c), then
 * - PIL backend (image_processing_siglip.py of transformers 4,
 *   SiglipImageProcessorPil of 5; image_transforms.rescale / normalize):
 *   x * rescale_factor in float64 cast to float32, (x - mean) / std in
 *   float32;
 * - torchvision backend (transformers 5's default,
 *   image_processing_utils_fast: _fuse_mean_std_and_rescale_factor, then
 *   torchvision's normalize): (x - mean * (1 / rescale_factor)) /
 *   (std * (1 / rescale_factor)) in float32;
 * channels first. */
#include "vision/vision.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static lmc_status read_triple(const json_t *j, const char *key, float def, const char *what,
                              float out[3]) {
    const json_t *v = json_object_get(j, key);
    if (!v || json_is_null(v)) {
        out[0] = out[1] = out[2] = def;
        return LMC_OK;
    }
    if (json_is_number(v)) {
        out[0] = out[1] = out[2] = (float)json_number_value(v);
        return LMC_OK;
    }
    if (!json_is_array(v) || json_array_size(v) != 3)
        return lmc_error(LMC_ERR_FORMAT, "%s: '%s' must be a number or a list of 3 numbers", what,
                         key);
    for (size_t i = 0; i < 3; i++) {
        const json_t *x = json_array_get(v, i);
        if (!json_is_number(x))
            return lmc_error(LMC_ERR_FORMAT, "%s: '%s'[%zu] is not a number", what, key, i);
        out[i] = (float)json_number_value(x);
    }
    return LMC_OK;
}

lmc_status lmc_image_processor_parse(const json_t *j, const char *what, lmc_image_processor *p) {
    if (!p) return lmc_error(LMC_ERR_INVALID_ARG, "lmc_image_processor_parse: p is NULL");
    memset(p, 0, sizeof *p);
    if (!what) what = "preprocessor_config.json";
    if (!json_is_object(j)) return lmc_error(LMC_ERR_FORMAT, "%s: not a JSON object", what);
    bool bad = false;
    p->do_resize = lmc_json_bool(j, "do_resize", true, &bad);
    p->do_rescale = lmc_json_bool(j, "do_rescale", true, &bad);
    p->do_normalize = lmc_json_bool(j, "do_normalize", true, &bad);
    p->rescale_factor = lmc_json_number(j, "rescale_factor", 1.0 / 255.0, &bad);
    int64_t resample = lmc_json_int(j, "resample", LMC_RESAMPLE_BICUBIC, &bad);
    int64_t seq = lmc_json_int(j, "image_seq_length", 0, &bad);
    if (bad)
        return lmc_error(LMC_ERR_FORMAT,
                         "%s: do_resize/do_rescale/do_normalize must be booleans, rescale_factor a "
                         "number, resample and image_seq_length integers",
                         what);
    if (resample != LMC_RESAMPLE_BICUBIC && resample != LMC_RESAMPLE_BILINEAR)
        return lmc_error(LMC_ERR_UNSUPPORTED,
                         "%s: resample = %lld is not supported (2 = bilinear, 3 = bicubic)", what,
                         (long long)resample);
    p->resample = (int)resample;
    if (seq < 0 || seq > (1 << 20))
        return lmc_error(LMC_ERR_FORMAT, "%s: image_seq_length = %lld is out of range", what,
                         (long long)seq);
    p->image_seq_length = (int32_t)seq;
    const char *type = lmc_json_string(j, "image_processor_type", "", NULL);
    size_t tl = strlen(type);
    p->backend = tl >= 3 && !strcmp(type + tl - 3, "Pil") ? LMC_RESIZE_PIL : LMC_RESIZE_TORCH;
    const json_t *size = json_object_get(j, "size");
    int64_t h = 224, w = 224;
    if (json_is_object(size)) {
        h = lmc_json_int(size, "height", -1, &bad);
        w = lmc_json_int(size, "width", -1, &bad);
        if (h < 0 && w < 0) { /* {"shortest_edge": N} is not how SigLIP resizes */
            return lmc_error(LMC_ERR_UNSUPPORTED,
                             "%s: 'size' needs height and width (shortest_edge resizing is not "
                             "supported)",
                             what);
        }
    } else if (json_is_integer(size)) {
        h = w = json_integer_value(size);
    } else if (size && !json_is_null(size)) {
        bad = true;
    }
    if (bad || h <= 0 || w <= 0 || h > (1 << 15) || w > (1 << 15))
        return lmc_error(LMC_ERR_FORMAT, "%s: 'size' must give a height and width in 1..32768",
                         what);
    p->height = (int32_t)h;
    p->width = (int32_t)w;
    if (!(p->rescale_factor > 0))
        return lmc_error(LMC_ERR_FORMAT, "%s: rescale_factor = %g must be positive", what,
                         p->rescale_factor);
    lmc_status st = read_triple(j, "image_mean", 0.5f, what, p->mean);
    if (st == LMC_OK) st = read_triple(j, "image_std", 0.5f, what, p->std);
    if (st != LMC_OK) return st;
    for (int c = 0; c < 3; c++)
        if (!(p->std[c] != 0))
            return lmc_error(LMC_ERR_FORMAT, "%s: image_std[%d] is zero", what, c);
    return LMC_OK;
}

lmc_status lmc_image_processor_load(const char *dir, lmc_image_processor *p) {
    if (!dir || !p)
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_image_processor_load: bad arguments");
    memset(p, 0, sizeof *p);
    char *path = lmc_path_join(dir, "preprocessor_config.json");
    if (!path) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    lmc_status st;
    json_t *j = NULL;
    if (!lmc_file_exists(path))
        st = lmc_error(LMC_ERR_NOT_FOUND, "%s: no preprocessor_config.json (the image processor)",
                       dir);
    else if ((st = lmc_json_load_file(path, &j)) == LMC_OK)
        st = lmc_image_processor_parse(j, path, p);
    json_decref(j);
    free(path);
    return st;
}

void lmc_image_processor_output_size(const lmc_image_processor *p, const lmc_image *im,
                                     int32_t *height, int32_t *width) {
    *height = p->do_resize ? p->height : im->height;
    *width = p->do_resize ? p->width : im->width;
}

lmc_status lmc_image_preprocess(const lmc_image_processor *p, const lmc_image *im, float *out) {
    if (!p || !im || !im->rgb || !out)
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_image_preprocess: bad arguments");
    lmc_image resized = {0};
    const lmc_image *src = im;
    if (p->do_resize && (im->width != p->width || im->height != p->height)) {
        lmc_status st =
            lmc_image_resize(im, p->width, p->height, p->resample, p->backend, &resized);
        if (st != LMC_OK) return st;
        src = &resized;
    }
    size_t plane = (size_t)src->width * (size_t)src->height;
    bool fused = p->backend == LMC_RESIZE_TORCH && p->do_rescale && p->do_normalize;
    float inv = (float)(1.0 / p->rescale_factor);
    for (int c = 0; c < 3; c++) {
        float *o = out + (size_t)c * plane;
        float m = fused ? p->mean[c] * inv : p->mean[c], s = fused ? p->std[c] * inv : p->std[c];
        for (size_t i = 0; i < plane; i++) {
            uint8_t u = src->rgb[i * 3 + (size_t)c];
            float v = u;
            if (p->do_rescale && !fused) v = (float)((double)u * p->rescale_factor);
            if (p->do_normalize) v = (v - m) / s;
            o[i] = v;
        }
    }
    lmc_image_free(&resized);
    return LMC_OK;
}
