/* The model registry: named presets (mlx-swift-examples' LLMRegistry and
 * VLMRegistry), built in and added at run time. Entries are never removed,
 * so the pointers handed out stay valid. */
#include "api/api.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const PHI_EOS[] = {"<|end|>", NULL};
static const char *const GEMMA_EOS[] = {"<end_of_turn>", NULL};
static const char *const LLAMA3_EOS[] = {"<|eot_id|>", NULL};
static const char *const CHATML_EOS[] = {"<|im_end|>", NULL};

static const lmc_model_preset BUILTIN[] = {
    {"llama3.2:1b", "mlx-community/Llama-3.2-1B-Instruct-4bit",
     "What is the difference between a fruit and a vegetable?", LLAMA3_EOS, LMC_MODEL_LLM},
    {"llama3.1:8b", "mlx-community/Meta-Llama-3.1-8B-Instruct-4bit",
     "What is the difference between a fruit and a vegetable?", LLAMA3_EOS, LMC_MODEL_LLM},
    {"mistral:7b", "mlx-community/Mistral-7B-Instruct-v0.3-4bit", "Describe the Swift language.",
     NULL, LMC_MODEL_LLM},
    {"phi3.5", "mlx-community/Phi-3.5-mini-instruct-4bit",
     "What is the gravity on Mars and the moon?", PHI_EOS, LMC_MODEL_LLM},
    {"phi3.5-moe", "mlx-community/Phi-3.5-MoE-instruct-4bit",
     "What is the gravity on Mars and the moon?", PHI_EOS, LMC_MODEL_LLM},
    {"qwen2.5:1.5b", "mlx-community/Qwen2.5-1.5B-Instruct-4bit", "Why is the sky blue?", CHATML_EOS,
     LMC_MODEL_LLM},
    {"qwen3:4b", "mlx-community/Qwen3-4B-4bit", "Why is the sky blue?", CHATML_EOS, LMC_MODEL_LLM},
    {"openelm:270m", "mlx-community/OpenELM-270M-Instruct", "Once upon a time there was", NULL,
     LMC_MODEL_LLM},
    {"gemma2:2b", "mlx-community/gemma-2-2b-it-4bit",
     "What is the difference between lettuce and cabbage?", GEMMA_EOS, LMC_MODEL_LLM},
    {"smollm2:1.7b", "mlx-community/SmolLM2-1.7B-Instruct", "Tell me about the history of Spain.",
     CHATML_EOS, LMC_MODEL_LLM},
    {"paligemma:3b", "mlx-community/paligemma-3b-mix-448-8bit", "Describe the image in English",
     NULL, LMC_MODEL_VLM},
};
#define N_BUILTIN ((int32_t)(sizeof BUILTIN / sizeof BUILTIN[0]))

/* Presets added at run time: a growing array of pointers to owned copies
 * (each copy allocated once and never moved). */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static lmc_model_preset **g_added;
static int32_t g_n_added, g_cap_added;

static void free_copy(lmc_model_preset *p) {
    if (!p) return;
    free((void *)p->name);
    free((void *)p->hub_id);
    free((void *)p->default_prompt);
    if (p->extra_eos)
        for (const char *const *e = p->extra_eos; *e; e++) free((void *)*e);
    free((void *)p->extra_eos);
    free(p);
}

static lmc_model_preset *copy_preset(const lmc_model_preset *in) {
    lmc_model_preset *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->kind = in->kind;
    p->name = lmc_strdup(in->name);
    p->hub_id = lmc_strdup(in->hub_id);
    p->default_prompt = in->default_prompt ? lmc_strdup(in->default_prompt) : NULL;
    size_t n = 0;
    while (in->extra_eos && in->extra_eos[n]) n++;
    const char **eos = calloc(n + 1, sizeof *eos);
    bool ok = p->name && p->hub_id && (!in->default_prompt || p->default_prompt) && eos;
    for (size_t i = 0; i < n && ok; i++) ok = (eos[i] = lmc_strdup(in->extra_eos[i])) != NULL;
    p->extra_eos = eos;
    if (!ok) {
        free_copy(p);
        return NULL;
    }
    return p;
}

lmc_status lmc_registry_add(const lmc_model_preset *preset) {
    if (!preset || !preset->name || !*preset->name || !preset->hub_id || !*preset->hub_id)
        return lmc_error(LMC_ERR_INVALID_ARG,
                         "lmc_registry_add: a preset needs a name and a hub_id");
    if (preset->kind != LMC_MODEL_LLM && preset->kind != LMC_MODEL_VLM)
        return lmc_error(LMC_ERR_INVALID_ARG, "lmc_registry_add: kind %d is not LLM or VLM",
                         (int)preset->kind);
    lmc_model_preset *p = copy_preset(preset);
    if (!p) return lmc_error(LMC_ERR_NOMEM, "out of memory");
    pthread_mutex_lock(&g_mu);
    lmc_status st = LMC_OK;
    if (g_n_added == g_cap_added) {
        int32_t cap = g_cap_added ? 2 * g_cap_added : 16;
        lmc_model_preset **a = realloc(g_added, (size_t)cap * sizeof *a);
        if (!a)
            st = lmc_error(LMC_ERR_NOMEM, "out of memory");
        else {
            g_added = a;
            g_cap_added = cap;
        }
    }
    /* the same name again: the new preset shadows the old one (lookups take
     * the newest), and the old one stays valid */
    if (st == LMC_OK) g_added[g_n_added++] = p;
    pthread_mutex_unlock(&g_mu);
    if (st != LMC_OK) free_copy(p);
    return st;
}

int32_t lmc_registry_count(void) {
    pthread_mutex_lock(&g_mu);
    int32_t n = N_BUILTIN + g_n_added;
    pthread_mutex_unlock(&g_mu);
    return n;
}

const lmc_model_preset *lmc_registry_get(int32_t i) {
    if (i < 0) return NULL;
    if (i < N_BUILTIN) return &BUILTIN[i];
    pthread_mutex_lock(&g_mu);
    const lmc_model_preset *p = i - N_BUILTIN < g_n_added ? g_added[i - N_BUILTIN] : NULL;
    pthread_mutex_unlock(&g_mu);
    return p;
}

static bool matches(const lmc_model_preset *p, const char *name) {
    return !strcmp(p->name, name) || !strcasecmp(p->hub_id, name);
}

const lmc_model_preset *lmc_registry_find(const char *name) {
    if (!name) return NULL;
    const lmc_model_preset *found = NULL;
    pthread_mutex_lock(&g_mu);
    for (int32_t i = g_n_added - 1; i >= 0 && !found; i--)
        if (matches(g_added[i], name)) found = g_added[i];
    pthread_mutex_unlock(&g_mu);
    for (int32_t i = 0; i < N_BUILTIN && !found; i++)
        if (matches(&BUILTIN[i], name)) found = &BUILTIN[i];
    return found;
}
