/* Internals of lmc_convert shared by its plan (convert.c) and its writer
 * (convert_write.c). */
#ifndef LMC_CONVERT_INTERNAL_H
#define LMC_CONVERT_INTERNAL_H

#include "base/json.h"
#include "models/model.h"
#include "tensor/safetensors.h"

/* A tensor after mlx-lm's sanitize: one source tensor, or the per-expert
 * tensors src[0..n_src) stacked on a new leading axis. */
typedef struct cv_tensor {
    char *name;
    const lmc_tensor **src;
    int n_src;
    lmc_dtype dtype;
    int ndim;
    int64_t shape[LMC_MAX_DIMS];
    bool used;
} cv_tensor;

typedef enum cv_kind {
    CV_CAST,       /* one tensor, floating ones cast to the output dtype */
    CV_QUANTIZE,   /* a float weight -> <p>.weight U32, <p>.scales, <p>.biases */
    CV_DEQUANTIZE, /* <p>.weight U32 + scales + biases -> a dense <p>.weight */
} cv_kind;

/* One unit of output: a tensor, or the tensors of one module. */
typedef struct cv_item {
    cv_kind kind;
    char *name;              /* the tensor (cast), or the module prefix */
    const cv_tensor *src[3]; /* the tensor or the weight; scales, biases */
    lmc_dtype dtype;         /* output dtype (cast, dequantize); scales dtype (quantize) */
    int bits, group;
    int64_t cols;        /* logical input dimension of a (de)quantized module */
    uint64_t nbytes;     /* bytes written */
    uint64_t parameters; /* as mlx_lm.utils.get_total_parameters counts them */
    int shard;
} cv_item;

typedef struct cv_job {
    const lmc_convert_params *p;
    cv_item *items;
    size_t n_items;
    int n_shards;
    char *tmp_dir;
    uint64_t total_bytes, done_bytes;
    lmc_convert_progress_fn progress;
    void *user_data;
} cv_job;

/* What a conversion will do: the input, its tensors, the output items. */
typedef struct cv_plan {
    const lmc_convert_params *p;
    lmc_model_config cfg; /* the input config.json */
    const json_t *in_quant;
    lmc_weights w;
    bool weights_open;
    cv_tensor *t; /* sorted by name (strcmp) */
    size_t n_t;
    cv_item *items;
    size_t n_items, cap_items;
    int bits, group;
    bool has_target;
    lmc_dtype target;
    /* mixed_* recipes (mlx_lm/convert.py mixed_quant_predicate_builder) */
    int low_bits, high_bits, layer_location;
    int64_t num_layers;
} cv_plan;

/* convert_plan.c: the tensors as mlx-lm names them (experts stacked), then
 * what each becomes (cast, quantize, dequantize), sorted by name, in shards
 * of at most shard_bytes; returns the shard count in *n_shards. */
lmc_status cv_build_tensors(cv_plan *pl);
lmc_status cv_plan_items(cv_plan *pl, uint64_t shard_bytes, int *n_shards);
/* convert_config.c: config.json as mlx_lm's save_config writes it. */
lmc_status cv_write_config(const cv_plan *pl, const char *dir);

int cv_natural_cmp(const char *a, const char *b);
/* Produces every shard, the index and the progress calls into job->tmp_dir. */
lmc_status cv_write_shards(cv_job *job);
/* Copies the tokenizer and generation files mlx-lm carries over. */
lmc_status cv_copy_side_files(const char *in_dir, const char *out_dir);

#endif
