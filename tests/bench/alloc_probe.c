// Counts the bytes PyTorch's CPU allocator holds (c10::alloc_cpu takes every
// tensor's memory with posix_memalign), for tests/bench/torch_peak_cpu.py,
// which loads it with LD_PRELOAD: the CPU has no torch.cuda.max_memory_allocated.
// probe_reset() starts a new peak; at each new peak the sizes then live are
// kept (the first 4096), so a script can say what the peak is made of.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <stddef.h>
#include <pthread.h>
#define SLOTS (1u << 20)
static void* keys[SLOTS];
static size_t sizes[SLOTS];
static size_t cur, peak, live;
static size_t pk[4096], npk;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int (*real_pm)(void**, size_t, size_t);
static void (*real_free)(void*);
static size_t slot(void* p) { return ((uintptr_t)p >> 4) * 2654435761u & (SLOTS - 1); }
int posix_memalign(void** p, size_t a, size_t n) {
  if (!real_pm) real_pm = dlsym(RTLD_NEXT, "posix_memalign");
  int r = real_pm(p, a, n);
  if (r == 0) {
    pthread_mutex_lock(&mu);
    if (live + 1 >= SLOTS) {  // full: stop counting rather than loop
      pthread_mutex_unlock(&mu);
      return r;
    }
    ++live;
    size_t i = slot(*p);
    while (keys[i]) i = (i + 1) & (SLOTS - 1);
    keys[i] = *p; sizes[i] = n;
    cur += n;
    if (cur > peak) {
      peak = cur; npk = 0;
      for (size_t k = 0; k < SLOTS && npk < 4096; ++k) if (keys[k]) pk[npk++] = sizes[k];
    }
    pthread_mutex_unlock(&mu);
  }
  return r;
}
void free(void* p) {
  if (!real_free) real_free = dlsym(RTLD_NEXT, "free");
  if (p) {
    pthread_mutex_lock(&mu);
    size_t i = slot(p);
    while (keys[i] && keys[i] != p) i = (i + 1) & (SLOTS - 1);
    if (keys[i] == p) {
      cur -= sizes[i];
      --live;
      // Backward-shift deletion: later entries of the chain move up, so a
      // lookup never stops at a hole before its key.
      size_t j = i;
      keys[i] = 0;
      for (;;) {
        j = (j + 1) & (SLOTS - 1);
        if (!keys[j]) break;
        size_t h = slot(keys[j]);
        if ((j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j))) {
          keys[i] = keys[j]; sizes[i] = sizes[j]; keys[j] = 0; i = j;
        }
      }
    }
    pthread_mutex_unlock(&mu);
  }
  real_free(p);
}
size_t probe_current(void) { return cur; }
size_t probe_peak(void) { return peak; }
void probe_reset(void) { peak = cur; }
size_t probe_peak_sizes(size_t* out, size_t n) { size_t k = 0; for (; k < npk && k < n; ++k) out[k] = pk[k]; return k; }
