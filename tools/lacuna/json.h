/* The one JSON writer of the tool, for every command's --json: one line of
 * JSON with the keys in the order written. Strings are escaped (quote,
 * backslash, control characters; bytes that are not UTF-8 become U+FFFD, as
 * JSON text must be UTF-8) and numbers that are not finite are null. */
#ifndef LACUNA_TOOL_JSON_H
#define LACUNA_TOOL_JSON_H

#include <stdbool.h>
#include <stdio.h>

#define CLI_JSON_DEPTH 8

typedef struct {
    FILE *out;
    int depth;                        /* open objects and arrays */
    char closer[CLI_JSON_DEPTH];      /* '}' or ']' for each */
    bool empty[CLI_JSON_DEPTH];       /* nothing written in it yet */
} cli_json;

/* "{" ... "}\n": the line's outer object. */
void cli_json_begin(cli_json *j, FILE *out);
void cli_json_end(cli_json *j);

/* Members: key is the member's name in an object, NULL in an array. */
void cli_json_object(cli_json *j, const char *key);   /* opens {, closed by cli_json_close */
void cli_json_array(cli_json *j, const char *key);    /* opens [, closed by cli_json_close */
void cli_json_close(cli_json *j);
void cli_json_int(cli_json *j, const char *key, long long v);
/* format: a printf conversion of one double ("%.6g", "%.6f"). */
void cli_json_real(cli_json *j, const char *key, double v, const char *format);
void cli_json_string(cli_json *j, const char *key, const char *s);
void cli_json_bool(cli_json *j, const char *key, bool v);

#endif
