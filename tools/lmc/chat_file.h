/* The file `lmc chat` saves a conversation to with /save and reads with
 * /load (its prompt cache goes next to it, FILE.kv):
 *   {"format": "lmc-chat", "version": 1, "system": TEXT or null,
 *    "messages": [{"role": "user" | "assistant", "content": TEXT}, ...]} */
#ifndef LMC_CHAT_FILE_H
#define LMC_CHAT_FILE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct chat_msg {
    char *role; /* "user" or "assistant" */
    char *content;
} chat_msg;

void chat_msgs_free(chat_msg *m, int n);

/* The conversation as that JSON object; NULL when out of memory. */
json_t *chat_file_json(const char *system, const chat_msg *msgs, int n_msgs);

/* Reads and checks FILE: *system (NULL: none) and *msgs, the caller's to
 * free. false (nothing returned) with the reason in why[0 .. why_size). */
bool chat_file_read(const char *path, char **system, chat_msg **msgs, int *n_msgs, char *why,
                    size_t why_size);

#endif
