/* The files a run names, checked before anything is read (cli.h,
 * cli_check_files): no output may be one of the inputs or another output. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What a path is: an existing file by device and inode (so symbolic and
 * hard links to it are the same file), or, for a file not there yet, the
 * folder it will be made in and its name there. */
typedef struct {
    bool known;
    dev_t dev;
    ino_t ino;
    char name[NAME_MAX + 1];   /* "" for an existing file */
} identity;

/* The last link of a chain of dangling symbolic links: where the file will be made. */
static void last_link(const char *path, char *buf, size_t len)
{
    snprintf(buf, len, "%s", path);
    for (int hops = 0; hops < 40; hops++) {
        char link[PATH_MAX];
        ssize_t n = readlink(buf, link, sizeof link - 1);
        if (n < 0) return;
        link[n] = '\0';
        /* a relative link is relative to the folder that holds it, which buf keeps */
        const char *slash = strrchr(buf, '/');
        size_t keep = link[0] == '/' || !slash ? 0 : (size_t)(slash - buf) + 1;
        if (keep + (size_t)n >= len) return;
        memcpy(buf + keep, link, (size_t)n + 1);
    }
}

static identity identify(const char *path)
{
    identity id = {0};
    struct stat sb;
    if (stat(path, &sb) == 0) {
        id.known = true, id.dev = sb.st_dev, id.ino = sb.st_ino;
        return id;
    }
    char target[PATH_MAX];
    last_link(path, target, sizeof target);
    const char *slash = strrchr(target, '/');
    const char *name = slash ? slash + 1 : target;
    char folder[PATH_MAX];
    snprintf(folder, sizeof folder, "%.*s", slash ? (int)(slash == target ? 1 : slash - target) : 1, slash ? target : ".");
    if (strlen(name) <= NAME_MAX && stat(folder, &sb) == 0) {
        id.known = true, id.dev = sb.st_dev, id.ino = sb.st_ino;
        snprintf(id.name, sizeof id.name, "%s", name);
    }
    return id;
}

static bool same(const identity *a, const identity *b)
{
    return a->known && b->known && a->dev == b->dev && a->ino == b->ino && strcmp(a->name, b->name) == 0;
}

static bool named(const cli_file *f) { return f->path && strcmp(f->path, "-") != 0; }

int cli_check_files(const char *cmd, const cli_file *inputs, int num_inputs, const cli_file *outputs, int num_outputs)
{
    identity in[CLI_MAX_FILES], out[CLI_MAX_FILES];
    if (num_inputs > CLI_MAX_FILES || num_outputs > CLI_MAX_FILES)
        return cli_usage_error(cmd, "more than %d files", CLI_MAX_FILES);
    for (int i = 0; i < num_inputs; i++)   /* '-' is standard input, which can be read once */
        for (int j = 0; j < i; j++)
            if (inputs[i].path && inputs[j].path && !strcmp(inputs[i].path, "-") && !strcmp(inputs[j].path, "-"))
                return cli_usage_error(cmd, "%s and %s are both '-': only one input can be standard input",
                                       inputs[j].role, inputs[i].role);
    for (int i = 0; i < num_inputs; i++) {
        struct stat sb;
        if (named(&inputs[i]) && stat(inputs[i].path, &sb) == 0 && S_ISDIR(sb.st_mode))
            return cli_usage_error(cmd, "%s '%s' is a directory, not a file", inputs[i].role, inputs[i].path);
        in[i] = named(&inputs[i]) ? identify(inputs[i].path) : (identity){0};
    }
    for (int k = 0; k < num_outputs; k++) {
        if (!named(&outputs[k])) {
            out[k] = (identity){0};
            continue;
        }
        out[k] = identify(outputs[k].path);
        for (int i = 0; i < num_inputs; i++)
            if (same(&out[k], &in[i]))
                return cli_usage_error(cmd, "%s '%s' is the same file as %s '%s': an output never replaces an input",
                                       outputs[k].role, outputs[k].path, inputs[i].role, inputs[i].path);
        for (int j = 0; j < k; j++)
            if (same(&out[k], &out[j]))
                return cli_usage_error(cmd, "%s '%s' and %s '%s' are the same file: give each output its own",
                                       outputs[j].role, outputs[j].path, outputs[k].role, outputs[k].path);
    }
    return CLI_OK;
}
