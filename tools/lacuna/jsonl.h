/* The tool's JSON reader, for JSON Lines: one object per line whose members
 * are strings, numbers, true, false or null (nested objects and arrays are
 * read past, so that extra members do no harm). Strict JSON otherwise
 * (RFC 8259): a malformed line is refused with the column and the reason. */
#ifndef LACUNA_TOOL_JSONL_H
#define LACUNA_TOOL_JSONL_H

#include <stdbool.h>
#include <stddef.h>

typedef enum { JSONL_NULL, JSONL_BOOL, JSONL_NUMBER, JSONL_STRING, JSONL_NESTED } jsonl_kind;

typedef struct {
    char *key;
    jsonl_kind kind;
    double number;   /* JSONL_NUMBER; JSONL_BOOL: 1 or 0 */
    char *string;    /* JSONL_STRING: UTF-8, NUL-terminated (a \u0000 inside is refused) */
} jsonl_member;

typedef struct {
    jsonl_member *members;
    int count, cap;
} jsonl_object;

/* Parses the object on line (no newline needed; surrounding whitespace
 * allowed) into *o, which must be zeroed or freed. Returns true, or false
 * with the reason in why ("column 12: expected ':' after a key"); a key
 * given twice is refused. */
bool jsonl_parse(const char *line, jsonl_object *o, char *why, size_t why_len);
/* The member named key, or NULL. */
const jsonl_member *jsonl_get(const jsonl_object *o, const char *key);
void jsonl_free(jsonl_object *o);

#endif
