// main.cu: the benchmark harness of a collsim-emitted protocol (CUDA runtime only; no MPI, no NCCL).
//
// * multi-gpu mode: one GPU per rank, peer access between all of them;
// * single-gpu mode: every rank on one GPU, as its own buffer set and its own
//   group of blocks in one launch (rank = blockIdx / ctas). This measures the
//   on-chip cost of the protocol, not the interconnect.
//
// Every launch is cooperative (all blocks resident at once), because ranks
// spin on each other. Each checked launch uses fresh inputs and every output
// element is compared with the reference (harness_host.h); a poll that waits
// longer than --timeout-ms aborts the run and names the rank, IR op and line.
//
// Buffers a program binds to multicast objects (multimem ops, NVLink SHARP) are
// allocated with the CUDA driver's virtual memory API and bound to a multicast
// object (cuMulticastCreate / AddDevice / BindMem, cuMemMap); a device or driver
// without multicast support ends the run with exit status 6 and says so.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "harness_host.h"
#include "program.h"

using namespace collsim_host;

namespace {

constexpr int kExitWrong = 3;
constexpr int kExitTimeout = 4;
constexpr int kExitCuda = 5;
constexpr int kExitRefused = 6;

[[noreturn]] void die(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

void cuda_check(cudaError_t err, const char* what, const char* file, int line) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "collsim_bench: %s failed: %s (%s:%d)\n", what, cudaGetErrorString(err), file, line);
    die(kExitCuda);
  }
}
#define CUDA_OK(call) cuda_check((call), #call, __FILE__, __LINE__)

// ---------------------------------------------------------------------------
// Harness kernels: inputs, canaries, checks (not part of the measured protocol)
// ---------------------------------------------------------------------------
__global__ void gen_input_kernel(char* input, int dtype, int rank, unsigned long long salt, long long count) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x)
    write_input(dtype, input, i, rank, salt);
}

struct LinePattern {
  unsigned int w[64];
  int n;
};

// Fill `nwords` words with a repeating line pattern restarting every `period` words (one channel).
__global__ void fill_pattern_kernel(char* p, LinePattern pat, long long period, long long nwords) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < nwords; i += (long long)gridDim.x * blockDim.x)
    reinterpret_cast<unsigned int*>(p)[i] = pat.w[(i % period) % pat.n];
}

__global__ void fill_u32_kernel(char* p, unsigned int word, long long nwords) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < nwords; i += (long long)gridDim.x * blockDim.x)
    reinterpret_cast<unsigned int*>(p)[i] = word;
}

// result[0]: wrong elements, result[1]: first wrong index.
__global__ void check_kernel(const char* output, int dtype, int nranks, unsigned long long salt, long long count,
                             unsigned long long* result) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x) {
    const double expected = (double)reference_code(nranks, salt, (unsigned long long)i) * dtype_unit(dtype);
    if (!element_ok(dtype, load_element(dtype, output, i), expected)) {
      atomicAdd(&result[0], 1ull);
      atomicMin(&result[1], (unsigned long long)i);
    }
  }
}

constexpr int kFillBlocks = 1024;
constexpr int kFillThreads = 256;

// ---------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------
struct RankMem {
  int device = 0;
  char* mc[COLLSIM_MAX_BUFFERS] = {};   // this rank's device's mapping of each multicast object
  cudaStream_t stream = nullptr;
  char* input = nullptr;
  char* output = nullptr;
  char* buf[COLLSIM_MAX_BUFFERS] = {};
  char* reg[COLLSIM_MAX_REGISTERS] = {};
  long long* ctrl = nullptr;            // [ctas]
  unsigned long long* check = nullptr;  // [2]
  cudaEvent_t start = nullptr, stop = nullptr;
};

struct Geometry {
  long long msg = 0;    // padded message
  long long chan = 0;   // bytes per channel
  long long io = 0;     // input/output bytes needed
  long long buf_stride[COLLSIM_MAX_BUFFERS] = {};
  long long reg_stride[COLLSIM_MAX_REGISTERS] = {};
};

struct Harness {
  Options opt;
  const CollsimProgramInfo* info = nullptr;
  bool multi = false;
  int nranks = 0;
  std::vector<RankMem> ranks;
  std::vector<int*> claims;  // per device used
  CollsimTimeout* report = nullptr;
  int* abort_flag = nullptr;
  Geometry cap;             // what is allocated
  std::string gpu_name;
  std::string gpu_mode;  // "single-gpu" or "multi-gpu"
  std::string system;
  FILE* csv = nullptr;
  unsigned long long salt = 1;
  long long launches = 0;   // since the last reset (= the next launch's ITER)
  long long chan_msg_max = 0;
  bool graph_ok = true;     // false once graph capture of cooperative launches failed
  long long mc_stride[COLLSIM_MAX_BUFFERS] = {};  // between the copies of the single-GPU multicast emulation
};

Geometry geometry(const Harness& h, long long size) {
  Geometry g;
  const long long gran = h.info->granule;
  g.msg = round_up(size, gran);
  const long long per = (g.msg + h.opt.ctas - 1) / h.opt.ctas;
  g.chan = round_up(per, (long long)h.nranks * gran);
  g.io = round_up((long long)h.opt.ctas * g.chan + (long long)h.nranks * gran + 4096, 4096);
  for (int b = 0; b < h.info->n_buffers; ++b) {
    // a whole number of lines per channel, so each channel starts on a line (and a fill pattern period)
    const long long line = h.info->buffers[b].line_bytes;
    g.buf_stride[b] = round_up(round_up(collsim_buffer_bytes(b, h.nranks, g.chan), 256), line);
    if (g.buf_stride[b] % 256) g.buf_stride[b] = round_up(g.buf_stride[b], 256 * line);
  }
  for (int r = 0; r < h.info->n_registers; ++r)
    g.reg_stride[r] = round_up(collsim_register_bytes(r, h.nranks, g.chan) + 256, 256);
  return g;
}

void set_device(const Harness& h, int rank) { CUDA_OK(cudaSetDevice(h.ranks[rank].device)); }

CollsimParams params_for(const Harness& h, const Geometry& g, int first_rank, int device_index) {
  CollsimParams p{};
  p.nranks = h.nranks;
  p.first_rank = first_rank;
  p.ctas = h.opt.ctas;
  p.msg_bytes = g.msg;
  p.chan_bytes = g.chan;
  p.timeout_ns = h.opt.timeout_ms * 1000000LL;
  for (int r = 0; r < h.nranks; ++r) {
    p.input[r] = h.ranks[r].input;
    p.output[r] = h.ranks[r].output;
    for (int b = 0; b < h.info->n_buffers; ++b) p.buf[b][r] = h.ranks[r].buf[b];
    for (int x = 0; x < h.info->n_registers; ++x) p.reg[x][r] = h.ranks[r].reg[x];
    p.ctrl[r] = h.ranks[r].ctrl;
  }
  for (int b = 0; b < h.info->n_buffers; ++b) p.buf_stride[b] = g.buf_stride[b];
  for (int x = 0; x < h.info->n_registers; ++x) p.reg_stride[x] = g.reg_stride[x];
  p.report = h.report;
  p.claim = h.claims[device_index];
  p.abort_flag = h.abort_flag;
  for (int b = 0; b < h.info->n_buffers; ++b) {
    p.mc[b] = h.ranks[h.multi ? first_rank : 0].mc[b];
    p.mc_stride[b] = h.mc_stride[b];
  }
  p.mc_copies = h.multi ? 1 : h.nranks;
  p.arg_iter = h.launches;  // frozen into a captured graph: every replay sees the capture's value
  return p;
}

// ---------------------------------------------------------------------------
// Failure reports
// ---------------------------------------------------------------------------
const CollsimOpInfo* op_info(const Harness& h, int id) {
  for (int i = 0; i < h.info->n_ops; ++i)
    if (h.info->ops[i].id == id) return &h.info->ops[i];
  return nullptr;
}

bool report_timeouts(const Harness& h) {
  bool any = false;
  for (int r = 0; r < h.nranks; ++r) {
    const volatile CollsimTimeout& t = h.report[r];
    if (t.code == 0) continue;
    any = true;
    const CollsimOpInfo* op = op_info(h, t.op);
    std::fprintf(stderr,
                 "collsim_bench: TIMEOUT: rank %d channel %d waited %.3f s in IR op #%d %s [%s], line %lld: "
                 "polled word 0x%llx, waiting for %lld (0x%llx)\n",
                 t.rank, t.channel, (double)t.waited_ns * 1e-9, t.op, op ? op->label : "?", op ? op->text : "?",
                 (long long)t.line, (unsigned long long)t.seen, (long long)t.want, (unsigned long long)t.want);
  }
  if (any || *reinterpret_cast<volatile int*>(h.abort_flag)) {
    if (!any) std::fprintf(stderr, "collsim_bench: TIMEOUT: a poll gave up (abort flag set) without a report\n");
    std::fprintf(stderr,
                 "collsim_bench: a rank waited longer than --timeout-ms=%lld for data or a flag that never came "
                 "(a hang: lost signal, wrong epoch, or ranks not running concurrently)\n",
                 h.opt.timeout_ms);
    return true;
  }
  return false;
}

// Wait for every rank's stream; a device-side timeout or a host backstop ends the run.
void wait_all(Harness& h, const char* what) {
  const double backstop_s = 2.0 * (double)h.opt.timeout_ms / 1000.0 + 30.0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(backstop_s);
  for (int r = 0; r < (h.multi ? h.nranks : 1); ++r) {
    set_device(h, r);
    while (true) {
      const cudaError_t err = cudaStreamQuery(h.ranks[r].stream);
      if (err == cudaSuccess) break;
      if (err != cudaErrorNotReady) cuda_check(err, what, __FILE__, __LINE__);
      if (std::chrono::steady_clock::now() > deadline) {
        report_timeouts(h);
        std::fprintf(stderr,
                     "collsim_bench: TIMEOUT: %s did not finish within %.0f s (host backstop); rank %d's GPU is "
                     "still busy\n",
                     what, backstop_s, r);
        die(kExitTimeout);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  if (report_timeouts(h)) die(kExitTimeout);
}

// ---------------------------------------------------------------------------
// Setup
// ---------------------------------------------------------------------------
void choose_mode(Harness& h) {
  int count = 0;
  CUDA_OK(cudaGetDeviceCount(&count));
  if (count == 0) {
    std::fprintf(stderr, "collsim_bench: no CUDA device\n");
    die(kExitRefused);
  }
  bool peers = count >= h.nranks;
  for (int a = 0; peers && a < h.nranks; ++a)
    for (int b = 0; peers && b < h.nranks; ++b) {
      if (a == b) continue;
      int ok = 0;
      CUDA_OK(cudaDeviceCanAccessPeer(&ok, a, b));
      if (!ok) peers = false;
    }
  if (h.opt.mode == "multi" && !peers) {
    std::fprintf(stderr,
                 "collsim_bench: --mode multi needs %d GPUs with peer access between every pair (%d visible%s)\n",
                 h.nranks, count, count >= h.nranks ? ", some pair lacks peer access" : "");
    die(kExitRefused);
  }
  h.multi = peers && h.opt.mode != "single";
  if (!h.multi && h.opt.device >= count) {
    std::fprintf(stderr, "collsim_bench: --device %d does not exist (%d visible)\n", h.opt.device, count);
    die(kExitRefused);
  }
  h.ranks.resize(h.nranks);
  for (int r = 0; r < h.nranks; ++r) h.ranks[r].device = h.multi ? r : h.opt.device;
  if (h.multi) {
    for (int a = 0; a < h.nranks; ++a) {
      CUDA_OK(cudaSetDevice(a));
      for (int b = 0; b < h.nranks; ++b) {
        if (a == b) continue;
        const cudaError_t err = cudaDeviceEnablePeerAccess(b, 0);
        if (err == cudaErrorPeerAccessAlreadyEnabled) {
          (void)cudaGetLastError();
        } else {
          CUDA_OK(err);
        }
      }
    }
  }
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, h.ranks[0].device));
  h.gpu_name = prop.name;
  h.gpu_mode = h.multi ? "multi-gpu" : "single-gpu";
  char sys[512];
  if (h.multi) {
    std::snprintf(sys, sizeof sys, "%d x %s, one rank per GPU, peer access", h.nranks, prop.name);
  } else {
    std::snprintf(sys, sizeof sys,
                  "%d ranks as block groups on one %s (device %d): on-chip cost, not the interconnect", h.nranks,
                  prop.name, h.opt.device);
  }
  h.system = sys;
}

void check_device(const Harness& h) {
  const int devices = h.multi ? h.nranks : 1;
  for (int d = 0; d < devices; ++d) {
    const int dev = h.ranks[d].device;
    cudaDeviceProp prop{};
    CUDA_OK(cudaGetDeviceProperties(&prop, dev));
    const int cc = prop.major * 10 + prop.minor;
    if (cc < h.info->min_sm) {
      std::fprintf(stderr, "collsim_bench: %s/%s needs compute capability %d.%d or newer; device %d (%s) is %d.%d\n",
                   h.info->protocol, h.info->algorithm, h.info->min_sm / 10, h.info->min_sm % 10, dev, prop.name,
                   prop.major, prop.minor);
      die(kExitRefused);
    }
    int coop = 0;
    CUDA_OK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
    if (!coop) {
      std::fprintf(stderr,
                   "collsim_bench: device %d (%s) does not support cooperative launches; ranks spin on each other, "
                   "so co-residency cannot be guaranteed and the run is refused\n",
                   dev, prop.name);
      die(kExitRefused);
    }
    CUDA_OK(cudaSetDevice(dev));
    int per_sm = 0;
    CUDA_OK(collsim_max_blocks_per_sm(h.opt.dtype, h.opt.threads, &per_sm));
    const long long fit = (long long)per_sm * prop.multiProcessorCount;
    const long long need = (long long)h.opt.ctas * (h.multi ? 1 : h.nranks);
    if (need > fit) {
      std::fprintf(stderr,
                   "collsim_bench: refusing a configuration that could deadlock: %lld blocks (%s x %d ctas) must run "
                   "at the same time because ranks spin on each other, but %s fits only %lld (%d per SM x %d SMs "
                   "at %d threads per block). Lower --ctas or --threads%s.\n",
                   need, h.multi ? "1 rank" : (std::to_string(h.nranks) + " ranks").c_str(), h.opt.ctas, prop.name,
                   fit, per_sm, prop.multiProcessorCount, h.opt.threads, h.multi ? "" : ", or use fewer ranks");
      die(kExitRefused);
    }
  }
}

// ---------------------------------------------------------------------------
// Multicast objects (NVLink SHARP) through the CUDA driver API, looked up at run time
// (cudaGetDriverEntryPointByVersion), so the harness links against the runtime alone.
// ---------------------------------------------------------------------------
// Each driver call the harness makes, with the version of its signature (cudaTypedefs.h PFN_<name>_<version>).
#define COLLSIM_DRIVER_CALLS(X)                                                                           \
  X(cuDeviceGet, v2000) X(cuDeviceGetAttribute, v2000) X(cuGetErrorString, v6000)                         \
  X(cuMemGetAllocationGranularity, v10020) X(cuMemCreate, v10020) X(cuMemAddressReserve, v10020)          \
  X(cuMemMap, v10020) X(cuMemSetAccess, v10020) X(cuMulticastCreate, v12010)                             \
  X(cuMulticastAddDevice, v12010) X(cuMulticastBindMem, v12010) X(cuMulticastGetGranularity, v12010)

struct DriverApi {
#define COLLSIM_DECLARE(name, version) PFN_##name##_##version name = nullptr;
  COLLSIM_DRIVER_CALLS(COLLSIM_DECLARE)
#undef COLLSIM_DECLARE
};

[[noreturn]] void multicast_unsupported(const std::string& why) {
  std::fprintf(stderr,
               "collsim_bench: not supported on this device: this program binds buffers to multicast objects "
               "(multimem instructions, NVLink SHARP: sm_90 GPUs on an NVSwitch with multicast, driver and "
               "fabric manager enabled); %s\n",
               why.c_str());
  die(kExitRefused);
}

template <typename F>
void driver_entry(const char* name, F* fn) {
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t err =
      cudaGetDriverEntryPointByVersion(name, reinterpret_cast<void**>(fn), 12010, cudaEnableDefault, &found);
  if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || *fn == nullptr)
    multicast_unsupported(std::string("the driver has no ") + name + " (CUDA 12.1 or newer is needed)");
}

DriverApi load_driver_api() {
  DriverApi api;
#define COLLSIM_LOOK_UP(name, version) driver_entry(#name, &api.name);
  COLLSIM_DRIVER_CALLS(COLLSIM_LOOK_UP)
#undef COLLSIM_LOOK_UP
  return api;
}

// A failed driver call during multicast set-up: NOT_SUPPORTED / NOT_PERMITTED / SYSTEM_NOT_READY mean the
// platform cannot multicast here; every failure ends the run (exit 6) naming the call.
void cu_ok(const DriverApi& api, CUresult res, const char* what) {
  if (res == CUDA_SUCCESS) return;
  const char* text = nullptr;
  if (api.cuGetErrorString(res, &text) != CUDA_SUCCESS || text == nullptr) text = "unknown error";
  multicast_unsupported(std::string(what) + " failed: " + text);
}

long long lcm_ll(long long a, long long b) {
  long long x = a, y = b;
  while (y) {
    const long long t = x % y;
    x = y;
    y = t;
  }
  return a / x * b;
}

// Every device used must report CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED (NCCL reads the same attribute).
void check_multicast(const Harness& h, const DriverApi& api) {
  for (int r = 0; r < (h.multi ? h.nranks : 1); ++r) {
    CUdevice dev = 0;
    cu_ok(api, api.cuDeviceGet(&dev, h.ranks[r].device), "cuDeviceGet");
    int supported = 0;
    cu_ok(api, api.cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, dev),
          "cuDeviceGetAttribute(MULTICAST_SUPPORTED)");
    if (!supported)
      multicast_unsupported("device " + std::to_string(h.ranks[r].device) +
                            " reports CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED = 0");
  }
}

// Allocate buffer b of every rank (`bytes` each) as physical memory mapped for every device, and bind the
// copies to one multicast object: its `numDevices` are the ranks' GPUs (multi-GPU), or the one GPU with every
// rank's copy bound at its own offset (single-GPU, where a multimem op is then issued once per copy). Sizes,
// offsets and mappings are multiples of the allocation granularity and of the multicast object's
// recommended granularity (cuMulticastGetGranularity).
void allocate_multicast(Harness& h, const DriverApi& api, int b, long long bytes) {
  const int devices = h.multi ? h.nranks : 1;
  std::vector<CUdevice> dev(devices);
  for (int d = 0; d < devices; ++d) cu_ok(api, api.cuDeviceGet(&dev[d], h.ranks[d].device), "cuDeviceGet");
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev[0];
  size_t alloc_gran = 0;
  cu_ok(api, api.cuMemGetAllocationGranularity(&alloc_gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
        "cuMemGetAllocationGranularity");
  CUmulticastObjectProp mc_prop = {};
  mc_prop.numDevices = (unsigned int)devices;
  mc_prop.size = (size_t)bytes;
  size_t mc_min = 0, mc_rec = 0;
  cu_ok(api, api.cuMulticastGetGranularity(&mc_min, &mc_prop, CU_MULTICAST_GRANULARITY_MINIMUM),
        "cuMulticastGetGranularity(MINIMUM)");
  cu_ok(api, api.cuMulticastGetGranularity(&mc_rec, &mc_prop, CU_MULTICAST_GRANULARITY_RECOMMENDED),
        "cuMulticastGetGranularity(RECOMMENDED)");
  const long long gran = lcm_ll(lcm_ll((long long)alloc_gran, (long long)mc_min), (long long)mc_rec);
  const long long size = round_up(std::max(bytes, 1LL), gran);
  const long long copies = h.multi ? 1 : h.nranks;
  mc_prop.size = (size_t)(size * copies);
  CUmemGenericAllocationHandle mc = 0;
  cu_ok(api, api.cuMulticastCreate(&mc, &mc_prop), "cuMulticastCreate");
  // every device joins before anything is bound or mapped (a bind blocks until all have)
  for (int d = 0; d < devices; ++d) cu_ok(api, api.cuMulticastAddDevice(mc, dev[d]), "cuMulticastAddDevice");
  std::vector<CUmemAccessDesc> access(devices);
  for (int d = 0; d < devices; ++d) {
    access[d].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access[d].location.id = dev[d];
    access[d].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  }
  for (int r = 0; r < h.nranks; ++r) {
    const int d = h.multi ? r : 0;
    CUDA_OK(cudaSetDevice(h.ranks[r].device));
    prop.location.id = dev[d];
    CUmemGenericAllocationHandle mem = 0;
    cu_ok(api, api.cuMemCreate(&mem, (size_t)size, &prop, 0), "cuMemCreate");
    CUdeviceptr va = 0;
    cu_ok(api, api.cuMemAddressReserve(&va, (size_t)size, (size_t)gran, 0, 0), "cuMemAddressReserve");
    cu_ok(api, api.cuMemMap(va, (size_t)size, 0, mem, 0), "cuMemMap");
    cu_ok(api, api.cuMemSetAccess(va, (size_t)size, access.data(), (size_t)devices), "cuMemSetAccess");
    cu_ok(api, api.cuMulticastBindMem(mc, (size_t)(h.multi ? 0 : r * size), mem, 0, (size_t)size, 0),
          "cuMulticastBindMem");
    h.ranks[r].buf[b] = reinterpret_cast<char*>(va);
  }
  for (int d = 0; d < devices; ++d) {  // each device maps the multicast object into its own range
    CUDA_OK(cudaSetDevice(h.ranks[d].device));
    CUdeviceptr mcva = 0;
    cu_ok(api, api.cuMemAddressReserve(&mcva, (size_t)(size * copies), (size_t)gran, 0, 0),
          "cuMemAddressReserve (multicast)");
    cu_ok(api, api.cuMemMap(mcva, (size_t)(size * copies), 0, mc, 0), "cuMemMap (multicast)");
    cu_ok(api, api.cuMemSetAccess(mcva, (size_t)(size * copies), &access[d], 1), "cuMemSetAccess (multicast)");
    for (int r = 0; r < h.nranks; ++r)
      if (!h.multi || r == d) h.ranks[r].mc[b] = reinterpret_cast<char*>(mcva);
  }
  h.mc_stride[b] = h.multi ? 0 : size;
}

void allocate(Harness& h) {
  long long biggest = 0;
  for (long long s : h.opt.sizes) biggest = std::max(biggest, s);
  h.cap = geometry(h, biggest);
  const int devices = h.multi ? h.nranks : 1;
  h.claims.assign(devices, nullptr);
  CUDA_OK(cudaHostAlloc(&h.report, sizeof(CollsimTimeout) * COLLSIM_MAX_RANKS,
                        cudaHostAllocMapped | cudaHostAllocPortable));
  CUDA_OK(cudaHostAlloc(&h.abort_flag, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  double total = 0;
  for (int r = 0; r < h.nranks; ++r) {
    RankMem& m = h.ranks[r];
    CUDA_OK(cudaSetDevice(m.device));
    if (h.multi || r == 0) {
      CUDA_OK(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking));
      CUDA_OK(cudaEventCreate(&m.start));
      CUDA_OK(cudaEventCreate(&m.stop));
    } else {
      m.stream = h.ranks[0].stream;
    }
    if (h.multi || r == 0) CUDA_OK(cudaMalloc(&h.claims[h.multi ? r : 0], sizeof(int) * COLLSIM_MAX_RANKS));
    auto alloc = [&](char** p, long long bytes, const char* what) {
      total += (double)bytes;
      const cudaError_t err = cudaMalloc(p, (size_t)std::max(bytes, 256LL));
      if (err != cudaSuccess) {
        std::fprintf(stderr,
                     "collsim_bench: cannot allocate %s for rank %d (%.2f GiB so far, %.2f GiB for this): %s. Use "
                     "smaller --sizes, fewer --ranks or --ctas.\n",
                     what, r, total / (1 << 30), (double)bytes / (1 << 30), cudaGetErrorString(err));
        die(kExitRefused);
      }
    };
    alloc(&m.input, h.cap.io, "the input");
    alloc(&m.output, h.cap.io, "the output");
    for (int b = 0; b < h.info->n_buffers; ++b)
      if (!h.info->buffers[b].multicast) alloc(&m.buf[b], h.cap.buf_stride[b] * h.opt.ctas, h.info->buffers[b].name);
    for (int x = 0; x < h.info->n_registers; ++x)
      alloc(&m.reg[x], h.cap.reg_stride[x] * h.opt.ctas, h.info->registers[x]);
    alloc(reinterpret_cast<char**>(&m.ctrl), (long long)sizeof(long long) * h.opt.ctas, "the launch counters");
    alloc(reinterpret_cast<char**>(&m.check), 2 * (long long)sizeof(unsigned long long), "the check result");
  }
  if (!h.info->multicast) return;
  const DriverApi api = load_driver_api();
  check_multicast(h, api);
  for (int b = 0; b < h.info->n_buffers; ++b)
    if (h.info->buffers[b].multicast) allocate_multicast(h, api, b, h.cap.buf_stride[b] * h.opt.ctas);
}

// Fresh protocol state for a new message size: initial buffer contents, ITER = 0.
void reset_state(Harness& h, const Geometry& g) {
  for (int r = 0; r < h.nranks; ++r) {
    RankMem& m = h.ranks[r];
    set_device(h, r);
    for (int b = 0; b < h.info->n_buffers; ++b) {
      const CollsimBufferInfo& info = h.info->buffers[b];
      const long long bytes = g.buf_stride[b] * h.opt.ctas;
      bool zero = true;
      for (int i = 0; i < info.init_words; ++i) zero = zero && info.init_line[i] == 0;
      if (!zero) {
        LinePattern pat{};
        pat.n = std::min(info.init_words, 64);
        for (int i = 0; i < pat.n; ++i) pat.w[i] = info.init_line[i];
        fill_pattern_kernel<<<kFillBlocks, kFillThreads, 0, m.stream>>>(m.buf[b], pat, g.buf_stride[b] / 4,
                                                                         bytes / 4);
        CUDA_OK(cudaGetLastError());
      } else {
        CUDA_OK(cudaMemsetAsync(m.buf[b], 0, (size_t)bytes, m.stream));
      }
    }
    for (int x = 0; x < h.info->n_registers; ++x)
      CUDA_OK(cudaMemsetAsync(m.reg[x], 0, (size_t)(g.reg_stride[x] * h.opt.ctas), m.stream));
    CUDA_OK(cudaMemsetAsync(m.input, 0, (size_t)g.io, m.stream));
    CUDA_OK(cudaMemsetAsync(m.ctrl, 0, sizeof(long long) * h.opt.ctas, m.stream));
  }
  for (size_t d = 0; d < h.claims.size(); ++d) {
    CUDA_OK(cudaSetDevice(h.ranks[d].device));
    CUDA_OK(cudaMemsetAsync(h.claims[d], 0, sizeof(int) * COLLSIM_MAX_RANKS, h.ranks[d].stream));
  }
  wait_all(h, "state reset");
  std::memset(h.report, 0, sizeof(CollsimTimeout) * COLLSIM_MAX_RANKS);
  *h.abort_flag = 0;
  h.launches = 0;
}

void launch_collective(Harness& h, const Geometry& g) {
  // A host barrier (IR HostBarrier) before the launch: every rank's previous launch has finished before any
  // rank's host actions and kernels start. One process drives every rank here, so draining every stream is
  // the barrier; in single-GPU mode one launch runs every rank and stream order already gives it.
  if (h.info->host_barrier && h.multi) wait_all(h, "the host barrier before a launch");
  if (h.multi) {
    for (int r = 0; r < h.nranks; ++r) {
      set_device(h, r);
      const CollsimParams p = params_for(h, g, r, r);
      CUDA_OK(collsim_launch(p, h.opt.dtype, h.opt.ctas, h.opt.threads, h.ranks[r].stream));
    }
  } else {
    set_device(h, 0);
    const CollsimParams p = params_for(h, g, 0, 0);
    CUDA_OK(collsim_launch(p, h.opt.dtype, h.nranks * h.opt.ctas, h.opt.threads, h.ranks[0].stream));
  }
  ++h.launches;
}

void prepare_inputs(Harness& h, long long size, unsigned long long salt) {
  const long long count = size / dtype_size(h.opt.dtype);
  for (int r = 0; r < h.nranks; ++r) {
    RankMem& m = h.ranks[r];
    set_device(h, r);
    gen_input_kernel<<<kFillBlocks, kFillThreads, 0, m.stream>>>(m.input, h.opt.dtype, r, salt, count);
    CUDA_OK(cudaGetLastError());
    // Canary: 0x7f7f7f7f is no possible result, so an output element the collective never writes fails.
    fill_u32_kernel<<<kFillBlocks, kFillThreads, 0, m.stream>>>(m.output, 0x7f7f7f7fu, round_up(size, 4) / 4);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemsetAsync(m.check, 0, sizeof(unsigned long long), m.stream));
    CUDA_OK(cudaMemsetAsync(m.check + 1, 0xff, sizeof(unsigned long long), m.stream));
  }
}

// Compare every output element of every rank with the reference; exit 3 on a mismatch.
long long verify_outputs(Harness& h, long long size, unsigned long long salt, long long iter, const char* phase,
                         int round) {
  const long long count = size / dtype_size(h.opt.dtype);
  for (int r = 0; r < h.nranks; ++r) {
    RankMem& m = h.ranks[r];
    set_device(h, r);
    check_kernel<<<kFillBlocks, kFillThreads, 0, m.stream>>>(m.output, h.opt.dtype, h.nranks, salt, count, m.check);
    CUDA_OK(cudaGetLastError());
  }
  wait_all(h, "the output check");
  for (int r = 0; r < h.nranks; ++r) {
    RankMem& m = h.ranks[r];
    set_device(h, r);
    unsigned long long res[2] = {0, 0};
    CUDA_OK(cudaMemcpy(res, m.check, sizeof res, cudaMemcpyDeviceToHost));
    if (res[0] == 0) continue;
    const long long i = (long long)res[1];
    const int esize = dtype_size(h.opt.dtype);
    unsigned char raw[4] = {0, 0, 0, 0};
    CUDA_OK(cudaMemcpy(raw, m.output + i * esize, (size_t)esize, cudaMemcpyDeviceToHost));
    const double got = load_element(h.opt.dtype, raw, 0);
    const double want = (double)reference_code(h.nranks, salt, (unsigned long long)i) * dtype_unit(h.opt.dtype);
    std::fprintf(stderr,
                 "collsim_bench: WRONG RESULT: %s/%s, %lld B, %s check %d (ITER=%lld), rank %d, element %lld "
                 "(byte %lld): got %.9g, expected %.9g (tolerance: %s); %llu of %lld elements wrong on this rank\n",
                 h.info->protocol, h.info->algorithm, size, phase, round, iter, r, i, i * esize, got, want,
                 tolerance_text(h.opt.dtype), res[0], count);
    for (int q = 0; q < h.nranks; ++q) {
      const long long code = input_code(q, salt, (unsigned long long)i);
      std::fprintf(stderr, "  rank %d input[%lld] = %g\n", q, i, (double)code * dtype_unit(h.opt.dtype));
    }
    die(kExitWrong);
  }
  return 0;
}

void checked_round(Harness& h, const Geometry& g, long long size, const char* phase, int round) {
  const unsigned long long salt = h.salt++;
  prepare_inputs(h, size, salt);
  const long long iter = h.launches;
  launch_collective(h, g);
  wait_all(h, "a checked collective");
  verify_outputs(h, size, salt, iter, phase, round);
}

double timed_eager(Harness& h, const Geometry& g) {
  const int devices = h.multi ? h.nranks : 1;
  for (int d = 0; d < devices; ++d) {
    set_device(h, d);
    CUDA_OK(cudaEventRecord(h.ranks[d].start, h.ranks[d].stream));
  }
  for (int it = 0; it < h.opt.iters; ++it) launch_collective(h, g);
  for (int d = 0; d < devices; ++d) {
    set_device(h, d);
    CUDA_OK(cudaEventRecord(h.ranks[d].stop, h.ranks[d].stream));
  }
  wait_all(h, "the timed launches");
  float worst = 0;
  for (int d = 0; d < devices; ++d) {
    set_device(h, d);
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, h.ranks[d].start, h.ranks[d].stop));
    worst = std::max(worst, ms);
  }
  return (double)worst * 1000.0 / h.opt.iters;
}

// Returns false (after cleaning up) when the runtime cannot capture the cooperative launches into a graph.
bool timed_graph(Harness& h, const Geometry& g, double* time_us) {
  if (h.info->host_barrier && h.multi) {
    std::fprintf(stderr, "collsim_bench: note: the program's host barrier cannot be captured into a CUDA graph; "
                 "timing plain launches\n");
    return false;
  }
  const int devices = h.multi ? h.nranks : 1;
  std::vector<cudaGraphExec_t> execs(devices, nullptr);
  std::vector<cudaGraph_t> graphs(devices, nullptr);
  for (int d = 0; d < devices; ++d) {
    set_device(h, d);
    CUDA_OK(cudaStreamBeginCapture(h.ranks[d].stream, cudaStreamCaptureModeThreadLocal));
    cudaError_t err = cudaSuccess;
    for (int it = 0; it < h.opt.iters && err == cudaSuccess; ++it) {
      const CollsimParams p = params_for(h, g, h.multi ? d : 0, d);
      const int blocks = h.multi ? h.opt.ctas : h.nranks * h.opt.ctas;
      err = collsim_launch(p, h.opt.dtype, blocks, h.opt.threads, h.ranks[d].stream);
    }
    const cudaError_t end = cudaStreamEndCapture(h.ranks[d].stream, &graphs[d]);
    if (err == cudaSuccess) err = end;
    if (err == cudaSuccess) err = cudaGraphInstantiate(&execs[d], graphs[d], 0);
    if (err != cudaSuccess) {
      std::fprintf(stderr, "collsim_bench: warning: cannot capture the cooperative launches into a CUDA graph "
                   "(%s); timing plain launches instead\n", cudaGetErrorString(err));
      (void)cudaGetLastError();
      for (int e = 0; e <= d; ++e) {
        if (execs[e]) (void)cudaGraphExecDestroy(execs[e]);
        if (graphs[e]) (void)cudaGraphDestroy(graphs[e]);
      }
      return false;
    }
  }
  for (int d = 0; d < devices; ++d) {
    set_device(h, d);
    CUDA_OK(cudaEventRecord(h.ranks[d].start, h.ranks[d].stream));
  }
  for (int d = 0; d < devices; ++d) {
    set_device(h, d);
    CUDA_OK(cudaGraphLaunch(execs[d], h.ranks[d].stream));
  }
  for (int d = 0; d < devices; ++d) {
    set_device(h, d);
    CUDA_OK(cudaEventRecord(h.ranks[d].stop, h.ranks[d].stream));
  }
  wait_all(h, "the timed graph");
  h.launches += h.opt.iters;
  float worst = 0;
  for (int d = 0; d < devices; ++d) {
    set_device(h, d);
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, h.ranks[d].start, h.ranks[d].stop));
    worst = std::max(worst, ms);
    CUDA_OK(cudaGraphExecDestroy(execs[d]));
    CUDA_OK(cudaGraphDestroy(graphs[d]));
  }
  *time_us = (double)worst * 1000.0 / h.opt.iters;
  return true;
}

// --check-all: every timed launch gets fresh inputs and a check; only the collective is timed.
double timed_checked(Harness& h, const Geometry& g, long long size) {
  double total_ms = 0;
  const int devices = h.multi ? h.nranks : 1;
  for (int it = 0; it < h.opt.iters; ++it) {
    const unsigned long long salt = h.salt++;
    prepare_inputs(h, size, salt);
    const long long iter = h.launches;
    for (int d = 0; d < devices; ++d) {
      set_device(h, d);
      CUDA_OK(cudaEventRecord(h.ranks[d].start, h.ranks[d].stream));
    }
    launch_collective(h, g);
    for (int d = 0; d < devices; ++d) {
      set_device(h, d);
      CUDA_OK(cudaEventRecord(h.ranks[d].stop, h.ranks[d].stream));
    }
    wait_all(h, "a checked timed collective");
    float worst = 0;
    for (int d = 0; d < devices; ++d) {
      set_device(h, d);
      float ms = 0;
      CUDA_OK(cudaEventElapsedTime(&ms, h.ranks[d].start, h.ranks[d].stop));
      worst = std::max(worst, ms);
    }
    total_ms += worst;
    verify_outputs(h, size, salt, iter, "timed", it);
  }
  return total_ms * 1000.0 / h.opt.iters;
}

void check_counters(Harness& h) {
  std::vector<long long> ctrl(h.opt.ctas);
  for (int r = 0; r < h.nranks; ++r) {
    set_device(h, r);
    CUDA_OK(cudaMemcpy(ctrl.data(), h.ranks[r].ctrl, sizeof(long long) * h.opt.ctas, cudaMemcpyDeviceToHost));
    for (int c = 0; c < h.opt.ctas; ++c) {
      if (ctrl[c] != h.launches) {
        std::fprintf(stderr, "collsim_bench: rank %d channel %d ran %lld launches, expected %lld\n", r, c, ctrl[c],
                     h.launches);
        die(kExitCuda);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Harness h;
  std::string err;
  if (!parse_options(argc, argv, &h.opt, &err)) {
    std::fprintf(stderr, "collsim_bench: %s\n%s", err.c_str(), usage(argv[0]).c_str());
    return 2;
  }
  if (h.opt.help) {
    std::printf("%s", usage(argv[0]).c_str());
    return 0;
  }
  h.info = &collsim_program_info();
  h.nranks = h.opt.ranks;
  const bool graph = h.opt.graph && !h.opt.check_all;

  std::printf("# collsim-emit: %s / %s allreduce (%s)\n", h.info->protocol, h.info->algorithm, h.info->emitter);
  if (h.info->unverified)
    std::printf("# *** UNVERIFIED *** emitted with --unverified; verifier: %s\n", h.info->verification);
  else
    std::printf("# verification (PTX model): %s\n", h.info->verification);
  if (h.info->assumptions[0]) std::printf("# hardware assumptions: %s\n", h.info->assumptions);
  if (h.info->data_domain[0]) std::printf("# data domain: %s\n", h.info->data_domain);

  choose_mode(h);
  check_device(h);
  allocate(h);

  int driver = 0, runtime = 0;
  CUDA_OK(cudaDriverGetVersion(&driver));
  CUDA_OK(cudaRuntimeGetVersion(&runtime));
  const std::string date = utc_now();
  std::printf("# %s: %s\n", h.gpu_mode.c_str(), h.system.c_str());
  std::printf("# ranks %d, ctas/rank %d, threads/block %d, dtype %s, launch %s%s, iters %d, warmup %d, "
              "checked launches %d before and %d after timing (%s)\n",
              h.nranks, h.opt.ctas, h.opt.threads, dtype_option(h.opt.dtype), graph ? "graph" : "eager",
              h.opt.check_all ? " (every launch checked)" : "", h.opt.iters, h.opt.warmup, h.opt.check_iters,
              h.opt.check_iters, tolerance_text(h.opt.dtype));
  std::printf("# driver %s, CUDA runtime %s, %s\n", cuda_version_text(driver).c_str(),
              cuda_version_text(runtime).c_str(), date.c_str());

  if (!h.opt.csv.empty()) {
    h.csv = std::fopen(h.opt.csv.c_str(), "w");
    if (!h.csv) {
      std::fprintf(stderr, "collsim_bench: cannot write %s\n", h.opt.csv.c_str());
      return 2;
    }
    std::fputs(csv_header().c_str(), h.csv);
    std::fflush(h.csv);
  }
  std::printf("%s", table_header().c_str());

  for (long long size : h.opt.sizes) {
    const Geometry g = geometry(h, size);
    reset_state(h, g);
    for (int i = 0; i < h.opt.check_iters; ++i) checked_round(h, g, size, "pre-timing", i);
    for (int i = 0; i < h.opt.warmup; ++i) launch_collective(h, g);
    wait_all(h, "the warm-up launches");
    double time_us = 0;
    bool graphed = false;
    if (h.opt.check_all) time_us = timed_checked(h, g, size);
    else if (graph && h.graph_ok) graphed = h.graph_ok = timed_graph(h, g, &time_us);
    if (!h.opt.check_all && !graphed) time_us = timed_eager(h, g);
    for (int i = 0; i < h.opt.check_iters; ++i) checked_round(h, g, size, "post-timing", i);
    check_counters(h);

    ResultRow row;
    row.gpu = h.gpu_name;
    row.gpu_mode = h.gpu_mode;
    row.system = h.system;
    row.protocol = h.info->protocol;
    row.algorithm = h.info->algorithm;
    row.launch = graphed ? "graph" : "eager";
    row.verification = h.info->verification;
    row.unverified = h.info->unverified != 0;
    row.date = date;
    row.driver = cuda_version_text(driver);
    row.runtime = cuda_version_text(runtime);
    row.ranks = h.nranks;
    row.ctas = h.opt.ctas;
    row.threads = h.opt.threads;
    row.iters = h.opt.iters;
    row.warmup = h.opt.warmup;
    row.check_iters = h.opt.check_iters;
    row.dtype = h.opt.dtype;
    row.size_bytes = size;
    row.time_us = time_us;
    row.notes = std::string(h.multi ? "" : "single-gpu: ranks share one GPU; on-chip cost. ") +
                (h.opt.check_all ? "every timed launch checked; " : "") + "cooperative launches";
    std::printf("%s", table_line(row).c_str());
    std::fflush(stdout);
    if (h.csv) {
      std::fputs(csv_line(row).c_str(), h.csv);
      std::fflush(h.csv);
    }
  }
  if (h.csv) std::fclose(h.csv);
  std::printf("# all results checked: OK\n");
  return 0;
}
