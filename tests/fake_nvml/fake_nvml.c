/* A fake libnvidia-ml.so.1 for kvprof's tests and simulated servers. It exports exactly the NVML
 * calls kvprof resolves with dlsym, with the public NVML signatures, and behaves as env vars say:
 *
 *   KVPROF_FAKE_NVML_GPUS=N        number of GPUs (default 1, at most 64)
 *   KVPROF_FAKE_NVML_SCRIPT=FILE   lines "<gpu> <total> <reserved> <used>" (bytes): each memory
 *                                  query of a GPU returns that GPU's next line; the last one sticks
 *   KVPROF_FAKE_NVML_LIVE=FILE     re-read on every call; lines
 *                                    "gpu <index> <total_bytes> <reserved_bytes> <used_bytes>"
 *                                    "proc <index> <pid> <used_bytes>"
 *                                  (write it to a temporary name and rename it over FILE)
 *   KVPROF_FAKE_NVML_DISABLE=LIST  comma list of "memory_v2", "processes_v3": those entry points
 *                                  answer NVML_ERROR_FUNCTION_NOT_FOUND, to test the fallbacks
 *   KVPROF_FAKE_NVML_FAIL=LIST     comma list of "init", "memory", "processes": those calls fail
 *                                  (init: DRIVER_NOT_LOADED, others: GPU_IS_LOST)
 *
 * Precedence for memory: live file line, then script, then an idle H100 80GB. Configuration is
 * read again by every nvmlInit_v2 call that starts a session (script positions restart). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_UNKNOWN = 999
};

typedef struct {
  int index;
} fake_device;
typedef fake_device* nvmlDevice_t;

typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;
#define FAKE_NVML_MEMORY_V2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

/* The layout both _v2 and _v3 process queries fill (24 bytes). */
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;

#define FAKE_MAX_GPUS 64
#define FAKE_MAX_SCRIPT 100000
#define FAKE_MAX_PROCS 256

typedef struct {
  unsigned long long total, reserved, used;
} mem_row;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_init_count = 0;
static int g_gpu_count = 1;
static fake_device g_devices[FAKE_MAX_GPUS];
static mem_row* g_script = NULL; /* all lines in file order */
static int* g_script_gpu = NULL;
static int g_script_len = 0;
static int g_script_pos[FAKE_MAX_GPUS]; /* index into g_script of the next line for each GPU */

static const unsigned long long k_default_total = 85520809984ULL;  /* 81559 MiB, an H100 80GB */
static const unsigned long long k_default_reserved = 553648128ULL; /* 528 MiB */

static int list_has(const char* env, const char* word) {
  const char* list = getenv(env);
  if (list == NULL) return 0;
  size_t n = strlen(word);
  const char* p = list;
  while ((p = strstr(p, word)) != NULL) {
    int starts = (p == list || p[-1] == ',');
    int ends = (p[n] == '\0' || p[n] == ',');
    if (starts && ends) return 1;
    p += n;
  }
  return 0;
}

static void free_script(void) {
  free(g_script);
  free(g_script_gpu);
  g_script = NULL;
  g_script_gpu = NULL;
  g_script_len = 0;
}

static void load_config(void) {
  const char* gpus = getenv("KVPROF_FAKE_NVML_GPUS");
  g_gpu_count = 1;
  if (gpus != NULL) {
    int n = atoi(gpus);
    g_gpu_count = n < 0 ? 0 : (n > FAKE_MAX_GPUS ? FAKE_MAX_GPUS : n);
  }
  for (int i = 0; i < FAKE_MAX_GPUS; ++i) {
    g_devices[i].index = i;
    g_script_pos[i] = -1;
  }
  free_script();
  const char* path = getenv("KVPROF_FAKE_NVML_SCRIPT");
  if (path == NULL) return;
  FILE* f = fopen(path, "r");
  if (f == NULL) return;
  int cap = 0;
  char line[512];
  while (fgets(line, sizeof line, f) != NULL && g_script_len < FAKE_MAX_SCRIPT) {
    int gpu;
    mem_row row;
    if (sscanf(line, "%d %llu %llu %llu", &gpu, &row.total, &row.reserved, &row.used) != 4)
      continue;
    if (gpu < 0 || gpu >= FAKE_MAX_GPUS) continue;
    if (g_script_len == cap) {
      cap = cap ? cap * 2 : 64;
      g_script = realloc(g_script, (size_t)cap * sizeof *g_script);
      g_script_gpu = realloc(g_script_gpu, (size_t)cap * sizeof *g_script_gpu);
      if (g_script == NULL || g_script_gpu == NULL) abort();
    }
    g_script[g_script_len] = row;
    g_script_gpu[g_script_len] = gpu;
    if (g_script_pos[gpu] < 0) g_script_pos[gpu] = g_script_len;
    ++g_script_len;
  }
  fclose(f);
}

/* Reads the live file: fills *row for `gpu` (returns 1 when found) and, when procs != NULL, up to
 * max_procs process entries of that GPU into procs (count in *n_procs). */
static int read_live(int gpu, mem_row* row, nvmlProcessInfo_t* procs, unsigned max_procs,
                     unsigned* n_procs) {
  const char* path = getenv("KVPROF_FAKE_NVML_LIVE");
  if (n_procs != NULL) *n_procs = 0;
  if (path == NULL) return 0;
  FILE* f = fopen(path, "r");
  if (f == NULL) return 0;
  int found = 0;
  char line[512];
  while (fgets(line, sizeof line, f) != NULL) {
    int idx;
    unsigned long long a, b, c;
    if (sscanf(line, "gpu %d %llu %llu %llu", &idx, &a, &b, &c) == 4) {
      if (idx == gpu && row != NULL) {
        row->total = a;
        row->reserved = b;
        row->used = c;
        found = 1;
      }
    } else if (sscanf(line, "proc %d %llu %llu", &idx, &a, &b) == 3) {
      if (idx == gpu && procs != NULL && *n_procs < max_procs) {
        nvmlProcessInfo_t* p = &procs[(*n_procs)++];
        p->pid = (unsigned int)a;
        p->usedGpuMemory = b;
        p->gpuInstanceId = 0xFFFFFFFFu;
        p->computeInstanceId = 0xFFFFFFFFu;
      }
    }
  }
  fclose(f);
  return found;
}

static nvmlReturn_t current_memory(nvmlDevice_t device, mem_row* out) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (device == NULL || out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (list_has("KVPROF_FAKE_NVML_FAIL", "memory")) return NVML_ERROR_GPU_IS_LOST;
  int gpu = device->index;
  if (read_live(gpu, out, NULL, 0, NULL)) return NVML_SUCCESS;
  if (g_script_pos[gpu] >= 0) {
    int pos = g_script_pos[gpu];
    *out = g_script[pos];
    for (int next = pos + 1; next < g_script_len; ++next) {
      if (g_script_gpu[next] == gpu) {
        g_script_pos[gpu] = next;
        break;
      }
    }
    return NVML_SUCCESS;
  }
  out->total = k_default_total;
  out->reserved = k_default_reserved;
  out->used = 0;
  return NVML_SUCCESS;
}

static unsigned long long free_of(const mem_row* r) {
  unsigned long long taken = r->reserved + r->used;
  return taken >= r->total ? 0 : r->total - taken;
}

nvmlReturn_t nvmlInit_v2(void) {
  pthread_mutex_lock(&g_lock);
  nvmlReturn_t rc = NVML_SUCCESS;
  if (list_has("KVPROF_FAKE_NVML_FAIL", "init")) {
    rc = NVML_ERROR_DRIVER_NOT_LOADED;
  } else {
    if (g_init_count == 0) load_config();
    ++g_init_count;
  }
  pthread_mutex_unlock(&g_lock);
  return rc;
}

nvmlReturn_t nvmlShutdown(void) {
  pthread_mutex_lock(&g_lock);
  nvmlReturn_t rc = NVML_SUCCESS;
  if (g_init_count == 0) {
    rc = NVML_ERROR_UNINITIALIZED;
  } else if (--g_init_count == 0) {
    free_script();
  }
  pthread_mutex_unlock(&g_lock);
  return rc;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return "Argument version mismatch";
    default:
      return "Unknown Error";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  *count = (unsigned int)g_gpu_count;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (device == NULL || index >= (unsigned int)g_gpu_count) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &g_devices[index];
  return NVML_SUCCESS;
}

static nvmlReturn_t copy_string(const char* text, char* out, unsigned int length) {
  if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (strlen(text) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(out, text, strlen(text) + 1);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (device == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  return copy_string("NVIDIA H100 80GB HBM3 (fake)", name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (device == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  char text[96];
  snprintf(text, sizeof text, "GPU-fake-%d-0000-0000-0000-000000000000", device->index);
  return copy_string(text, uuid, length);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  if (list_has("KVPROF_FAKE_NVML_DISABLE", "memory_v2")) return NVML_ERROR_FUNCTION_NOT_FOUND;
  if (memory == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != FAKE_NVML_MEMORY_V2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  pthread_mutex_lock(&g_lock);
  mem_row r;
  nvmlReturn_t rc = current_memory(device, &r);
  pthread_mutex_unlock(&g_lock);
  if (rc != NVML_SUCCESS) return rc;
  memory->total = r.total;
  memory->reserved = r.reserved;
  memory->used = r.used;
  memory->free = free_of(&r);
  return NVML_SUCCESS;
}

/* v1: like the real driver, "used" includes the reserved memory. */
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  if (memory == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&g_lock);
  mem_row r;
  nvmlReturn_t rc = current_memory(device, &r);
  pthread_mutex_unlock(&g_lock);
  if (rc != NVML_SUCCESS) return rc;
  memory->total = r.total;
  memory->free = free_of(&r);
  memory->used = r.used + r.reserved;
  return NVML_SUCCESS;
}

static nvmlReturn_t processes(nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (device == NULL || count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (list_has("KVPROF_FAKE_NVML_FAIL", "processes")) return NVML_ERROR_GPU_IS_LOST;
  nvmlProcessInfo_t found[FAKE_MAX_PROCS];
  unsigned n = 0;
  read_live(device->index, NULL, found, FAKE_MAX_PROCS, &n);
  if (*count < n || (infos == NULL && n > 0)) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (n > 0) memcpy(infos, found, n * sizeof *infos);
  *count = n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  if (list_has("KVPROF_FAKE_NVML_DISABLE", "processes_v3")) return NVML_ERROR_FUNCTION_NOT_FOUND;
  return processes(device, count, infos);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  return processes(device, count, infos);
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  return copy_string("550.54.15", version, length);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* cuda_driver_version) {
  if (cuda_driver_version == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  *cuda_driver_version = 12040;
  return NVML_SUCCESS;
}
