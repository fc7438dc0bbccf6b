/*
 * bio — the background thread for disk work; see bio.h.
 *
 * A mutex and a condition variable hand a job over; the thread writes one
 * byte to a pipe when it is done, and the loop's read of it runs the done
 * callback. libevent itself is never touched from the thread.
 */
#include "bio.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

struct bio {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pipe[2];      /* [0] read by the loop, [1] written by the thread */
    struct event *ev; /* pipe[0] readable */

    /* Under mu: */
    bio_job_fn fn; /* the job handed over, not yet taken */
    void *arg;
    bool stop;
    bool running; /* the thread is inside a job */
    int result;

    /* The loop's own: */
    bio_done_cb done;
    void *done_arg;
    bool busy;
};

static void *
bio_main(void *p)
{
    struct bio *b = p;

    pthread_mutex_lock(&b->mu);
    for (;;) {
        bio_job_fn fn;
        void *arg;
        int result;
        char one = 1;

        while (b->fn == NULL && !b->stop)
            pthread_cond_wait(&b->cv, &b->mu);
        if (b->fn == NULL)
            break;
        fn = b->fn;
        arg = b->arg;
        b->fn = NULL;
        b->running = true;
        pthread_mutex_unlock(&b->mu);
        result = fn(arg);
        pthread_mutex_lock(&b->mu);
        b->result = result;
        b->running = false;
        pthread_cond_broadcast(&b->cv);
        /* A pipe never fills with one byte per job; EINTR only. */
        while (write(b->pipe[1], &one, 1) < 0 && errno == EINTR)
            ;
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static void
on_pipe(evutil_socket_t fd, short what, void *arg)
{
    struct bio *b = arg;
    char buf[16];
    bio_done_cb done;
    int result;

    (void)what;
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
    pthread_mutex_lock(&b->mu);
    if (!b->busy || b->fn != NULL || b->running) {
        pthread_mutex_unlock(&b->mu);
        return;
    }
    result = b->result;
    pthread_mutex_unlock(&b->mu);
    done = b->done;
    b->busy = false;
    b->done = NULL;
    if (done != NULL)
        done(result, b->done_arg);
}

struct bio *
bio_new(struct event_base *base)
{
    struct bio *b = calloc(1, sizeof(*b));
    bool mu = false, cv = false, started;
    sigset_t all, old;

    if (b == NULL)
        return NULL;
    b->pipe[0] = b->pipe[1] = -1;
    if (pthread_mutex_init(&b->mu, NULL) != 0)
        goto fail;
    mu = true;
    if (pthread_cond_init(&b->cv, NULL) != 0)
        goto fail;
    cv = true;
    if (pipe(b->pipe) != 0 || fcntl(b->pipe[0], F_SETFD, FD_CLOEXEC) != 0 ||
        fcntl(b->pipe[1], F_SETFD, FD_CLOEXEC) != 0 ||
        fcntl(b->pipe[0], F_SETFL, O_NONBLOCK) != 0)
        goto fail;
    b->ev = event_new(base, b->pipe[0], EV_READ | EV_PERSIST, on_pipe, b);
    if (b->ev == NULL || event_add(b->ev, NULL) != 0)
        goto fail;
    /* Every signal stays the loop's (SIGTERM, SIGHUP through libevent):
     * the thread starts with all of them blocked. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    started = pthread_create(&b->thread, NULL, bio_main, b) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!started)
        goto fail;
    return b;
fail:
    if (b->ev != NULL)
        event_free(b->ev);
    if (b->pipe[0] >= 0)
        close(b->pipe[0]);
    if (b->pipe[1] >= 0)
        close(b->pipe[1]);
    if (cv)
        pthread_cond_destroy(&b->cv);
    if (mu)
        pthread_mutex_destroy(&b->mu);
    free(b);
    return NULL;
}

void
bio_free(struct bio *b)
{
    if (b == NULL)
        return;
    pthread_mutex_lock(&b->mu);
    while (b->fn != NULL || b->running)
        pthread_cond_wait(&b->cv, &b->mu);
    b->stop = true;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->thread, NULL);
    event_free(b->ev);
    close(b->pipe[0]);
    close(b->pipe[1]);
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

int
bio_run(struct bio *b, bio_job_fn fn, bio_done_cb done, void *arg)
{
    if (b->busy)
        return -1;
    b->busy = true;
    b->done = done;
    b->done_arg = arg;
    pthread_mutex_lock(&b->mu);
    b->fn = fn;
    b->arg = arg;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return 0;
}

bool
bio_busy(const struct bio *b)
{
    return b != NULL && b->busy;
}
