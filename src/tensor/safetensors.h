/* safetensors files: read through mmap (one file, or shards listed by
 * model.safetensors.index.json), and write (convert, fixtures). */
#ifndef LMC_SAFETENSORS_H
#define LMC_SAFETENSORS_H

#include "tensor/tensor.h"

#include <jansson.h>

/* One mapped file. Tensor views point into the mapping. */
typedef struct lmc_safetensors {
    lmc_mapped_file file;
    lmc_tensor *tensors; /* sorted by name */
    size_t n_tensors;
    json_t *metadata; /* the __metadata__ object, or NULL */
    char *names;      /* storage for tensor names */
} lmc_safetensors;

/* Parses a header already in memory (data = whole file). Every offset,
 * length and shape is checked against size and for overflow; `what` names
 * the file in errors. Used by lmc_safetensors_open and the fuzzer. */
lmc_status lmc_safetensors_parse(const uint8_t *data, size_t size, const char *what,
                                 lmc_safetensors *out);
lmc_status lmc_safetensors_open(const char *path, lmc_safetensors *out);
void lmc_safetensors_close(lmc_safetensors *st);
const lmc_tensor *lmc_safetensors_find(const lmc_safetensors *st, const char *name);

/* A prefix rename: names beginning with `from` appear as `to` + the rest. */
typedef struct lmc_weight_rename {
    const char *from, *to;
} lmc_weight_rename;

/* All tensors of a model folder: model.safetensors.index.json's shards, or
 * model.safetensors, or every *.safetensors in the folder. */
typedef struct lmc_weights {
    char *dir;
    lmc_safetensors *files;
    size_t n_files;
    const lmc_tensor **index; /* all tensors, sorted by name */
    size_t n_tensors;
    uint64_t total_bytes;
    /* config.json's MLX "quantization" object (borrowed), or NULL: consulted
     * when binding quantized modules. */
    const json_t *quantization;
    /* A view (lmc_weights_view): tensors renamed, files borrowed from the
     * parent; the renames, to map names back (quantization overrides are
     * keyed by the file's module paths). */
    lmc_tensor *view_tensors; /* owned copies with the new names */
    char *view_names;
    const lmc_weight_rename *renames;
    size_t n_renames;
} lmc_weights;

lmc_status lmc_weights_open(const char *dir, lmc_weights *out);
/* A view of w holding the tensors whose names begin with one of the
 * renames' `from` (the first that matches), named `to` + the rest: e.g.
 * {"language_model.model.", "model."} shows a VLM's language model with an
 * LLM's names. Data stays where it is; w must outlive the view, which is
 * closed with lmc_weights_close. renames (static storage) is borrowed. */
lmc_status lmc_weights_view(const lmc_weights *w, const lmc_weight_rename *renames,
                            size_t n_renames, lmc_weights *out);
/* The name a view's tensor or module has in the file (the rename undone),
 * into buf; the name itself for a plain lmc_weights. */
const char *lmc_weights_file_name(const lmc_weights *w, const char *name, char *buf, size_t size);
void lmc_weights_close(lmc_weights *w);
/* NULL when absent (no error set). */
const lmc_tensor *lmc_weights_find(const lmc_weights *w, const char *name);
/* Like find, but a missing tensor is an LMC_ERR_NOT_FOUND error naming it. */
lmc_status lmc_weights_get(const lmc_weights *w, const char *name, const lmc_tensor **out);
/* Gets a tensor and checks its shape (ndim values of shape; -1 = any):
 * a mismatch is an LMC_ERR_SHAPE error naming the key and both shapes. */
lmc_status lmc_weights_get_shaped(const lmc_weights *w, const char *name, int ndim,
                                  const int64_t *shape, const lmc_tensor **out);

/* Writer: collect tensors (data borrowed until write), then write the file
 * atomically (a temporary file renamed into place; nothing left on error). */
typedef struct lmc_safetensors_writer lmc_safetensors_writer;
lmc_status lmc_safetensors_writer_create(lmc_safetensors_writer **out);
void lmc_safetensors_writer_free(lmc_safetensors_writer *w);
/* Adds a tensor; name and shape are copied, data is borrowed. */
lmc_status lmc_safetensors_writer_add(lmc_safetensors_writer *w, const char *name, lmc_dtype dtype,
                                      int ndim, const int64_t *shape, const void *data);
/* Drops the last n tensors added (n <= count). */
void lmc_safetensors_writer_remove_last(lmc_safetensors_writer *w, size_t n);
/* Sets a __metadata__ string entry. */
lmc_status lmc_safetensors_writer_set_metadata(lmc_safetensors_writer *w, const char *key,
                                               const char *value);
lmc_status lmc_safetensors_writer_write(lmc_safetensors_writer *w, const char *path);

#endif
