// Holds Swift's cooperative pool to one thread in a test process, through the runtime's global-executor hooks
// (`swift_task_enqueueGlobal_hook` and the delayed forms, exported by libswift_Concurrency): every job the global
// executor gets runs on one thread of ours, in order, and a delayed job when its time comes. On Apple's platforms
// `LIBDISPATCH_COOPERATIVE_POOL_STRICT=1` does this; Linux's libdispatch has no such switch (measured: eight tasks
// that each block 200 ms still run two at a time with it set), so it is written here, by hand, for the tests alone.
#include "CPoolHold.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SWIFTCALL __attribute__((swiftcall))

typedef struct {
    void *identity;
    uintptr_t implementation;
} SerialExecutorRef;

typedef SWIFTCALL void (*EnqueueOriginal)(void *job);
typedef SWIFTCALL void (*EnqueueHook)(void *job, EnqueueOriginal original);
typedef SWIFTCALL void (*DelayOriginal)(unsigned long long delay, void *job);
typedef SWIFTCALL void (*DelayHook)(unsigned long long delay, void *job, DelayOriginal original);
typedef SWIFTCALL void (*DeadlineOriginal)(long long sec, long long nsec, long long tsec, long long tnsec, int clock,
                                           void *job);
typedef SWIFTCALL void (*DeadlineHook)(long long sec, long long nsec, long long tsec, long long tnsec, int clock,
                                       void *job, DeadlineOriginal original);

extern EnqueueHook swift_task_enqueueGlobal_hook;
extern DelayHook swift_task_enqueueGlobalWithDelay_hook;
extern DeadlineHook swift_task_enqueueGlobalWithDeadline_hook;
extern SWIFTCALL void swift_job_run(void *job, SerialExecutorRef executor);
extern void swift_get_time(long long *seconds, long long *nanoseconds, int clock);

typedef struct Entry {
    void *job;
    uint64_t due;  // CLOCK_MONOTONIC nanoseconds; 0: now
    struct Entry *next;
} Entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static Entry *ready_head, *ready_tail;
static Entry *delayed;  // sorted by due
static bool held;

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void push_ready(Entry *entry) {
    entry->next = NULL;
    if (ready_tail) ready_tail->next = entry; else ready_head = entry;
    ready_tail = entry;
}

static void add(void *job, uint64_t due) {
    Entry *entry = malloc(sizeof(Entry));
    if (!entry) abort();
    entry->job = job;
    entry->due = due;
    pthread_mutex_lock(&lock);
    if (due == 0) {
        push_ready(entry);
    } else {
        Entry **place = &delayed;
        while (*place && (*place)->due <= due) place = &(*place)->next;
        entry->next = *place;
        *place = entry;
    }
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
}

static void *worker(void *unused) {
    (void)unused;
    pthread_mutex_lock(&lock);
    for (;;) {
        uint64_t now = now_ns();
        while (delayed && delayed->due <= now) {
            Entry *entry = delayed;
            delayed = entry->next;
            push_ready(entry);
        }
        if (ready_head) {
            Entry *entry = ready_head;
            ready_head = entry->next;
            if (!ready_head) ready_tail = NULL;
            pthread_mutex_unlock(&lock);
            void *job = entry->job;
            free(entry);
            SerialExecutorRef generic = {NULL, 0};
            swift_job_run(job, generic);
            pthread_mutex_lock(&lock);
            continue;
        }
        if (delayed) {
            struct timespec until;
            uint64_t due = delayed->due;
            until.tv_sec = (time_t)(due / 1000000000ull);
            until.tv_nsec = (long)(due % 1000000000ull);
            pthread_cond_timedwait(&wake, &lock, &until);
        } else {
            pthread_cond_wait(&wake, &lock);
        }
    }
    return NULL;
}

static SWIFTCALL void enqueue(void *job, EnqueueOriginal original) {
    (void)original;
    add(job, 0);
}

static SWIFTCALL void enqueue_after(unsigned long long delay, void *job, DelayOriginal original) {
    (void)original;
    add(job, now_ns() + delay + 1);
}

// The deadline is on the runtime's clock `clock` (continuous or suspending): what is left of it, read on that clock
// with the runtime's own `swift_get_time`, is counted from now on ours. A deadline already past runs now.
static SWIFTCALL void enqueue_at(long long sec, long long nsec, long long tsec, long long tnsec, int clock, void *job,
                                 DeadlineOriginal original) {
    (void)tsec;
    (void)tnsec;
    (void)original;
    long long now_sec = 0, now_nsec = 0;
    swift_get_time(&now_sec, &now_nsec, clock);
    long long left = (sec - now_sec) * 1000000000ll + (nsec - now_nsec);
    add(job, now_ns() + (left > 0 ? (uint64_t)left : 0) + 1);
}

bool salvo_pool_held_to_one_thread(void) { return held; }

__attribute__((constructor)) static void install(void) {
    const char *value = getenv("SALVO_TEST_ONE_POOL_THREAD");
    if (!value || strcmp(value, "1") != 0) return;
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&wake, &attributes);
    pthread_t thread;
    if (pthread_create(&thread, NULL, worker, NULL) != 0) abort();
    pthread_detach(thread);
    swift_task_enqueueGlobal_hook = enqueue;
    swift_task_enqueueGlobalWithDelay_hook = enqueue_after;
    swift_task_enqueueGlobalWithDeadline_hook = enqueue_at;
    held = true;
}
