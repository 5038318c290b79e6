/* The signal clean-up list of named temporary files (io_internal.h). The
 * handler may run at any instruction, so the list is a fixed table of paths
 * with an atomic state each, and the handler only reads it, unlinks and
 * re-raises: every call it makes is async-signal-safe. */
#include "io/io_internal.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

enum { SLOTS = 64 };
enum { SLOT_FREE = 0, SLOT_FILLING, SLOT_LISTED };

static struct {
    atomic_int state;
    char path[PATH_MAX];
} slots[SLOTS];

static const int cleanup_signals[] = {SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGTERM, SIGXFSZ};
static pthread_once_t install_once = PTHREAD_ONCE_INIT;

static void remove_listed_then_die(int sig)
{
    for (int i = 0; i < SLOTS; i++)
        if (atomic_load(&slots[i].state) == SLOT_LISTED) unlink(slots[i].path);
    signal(sig, SIG_DFL);
    raise(sig);   /* delivered with the default action when the handler returns */
}

static void install_handlers(void)
{
    for (size_t i = 0; i < sizeof cleanup_signals / sizeof cleanup_signals[0]; i++) {
        struct sigaction old;
        if (sigaction(cleanup_signals[i], NULL, &old) != 0) continue;
        if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;   /* the caller's own, or ignored */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = remove_listed_then_die;
        sigemptyset(&sa.sa_mask);
        sigaction(cleanup_signals[i], &sa, NULL);
    }
}

int lac_temp_register(const char *path)
{
    size_t len = strlen(path);
    if (len >= PATH_MAX) return -1;
    pthread_once(&install_once, install_handlers);
    for (int i = 0; i < SLOTS; i++) {
        int expected = SLOT_FREE;
        if (!atomic_compare_exchange_strong(&slots[i].state, &expected, SLOT_FILLING)) continue;
        memcpy(slots[i].path, path, len + 1);
        atomic_store(&slots[i].state, SLOT_LISTED);
        return i;
    }
    return -1;
}

void lac_temp_unregister(int slot)
{
    if (slot >= 0 && slot < SLOTS) atomic_store(&slots[slot].state, SLOT_FREE);
}
