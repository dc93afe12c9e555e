// program.h: the interface between the generated kernel (kernel.cu) and the
// benchmark harness (main.cu). Copied unchanged by `collsim emit`.
#pragma once

#include <cuda_runtime.h>

#define COLLSIM_MAX_RANKS 16
#define COLLSIM_MAX_BUFFERS 8
#define COLLSIM_MAX_REGISTERS 8
#define COLLSIM_MAX_THREADS 1024

// Storage type of bfloat16 elements (bits only; kernels convert with cuda_bf16.h).
struct collsim_bf16 {
  unsigned short bits;
};

// What a poll that timed out reports (one slot per rank, in mapped host memory).
struct CollsimTimeout {
  int code;                  // 0: none, 1: poll timed out
  int rank;
  int channel;
  int op;                    // IR op number (see collsim_program_info().ops)
  long long line;            // line index within the polled range
  unsigned long long seen;   // the polled word as last loaded
  long long want;            // the value the predicate waits for
  unsigned long long waited_ns;
};

// Kernel arguments. Every rank's memory is visible to every launch: peer
// pointers (multi-GPU with peer access) or buffers on the same device
// (single-GPU mode).
struct CollsimParams {
  int nranks;
  int first_rank;            // rank of block 0 (0 in single-GPU mode, the device's rank otherwise)
  int ctas;                  // blocks (channels) per rank
  int pad0;
  long long msg_bytes;       // message size, rounded up to the program's granule
  long long chan_bytes;      // bytes per channel (channel c covers [c*chan_bytes, ...))
  long long timeout_ns;      // a poll gives up after this long
  char* input[COLLSIM_MAX_RANKS];
  char* output[COLLSIM_MAX_RANKS];
  char* buf[COLLSIM_MAX_BUFFERS][COLLSIM_MAX_RANKS];
  long long buf_stride[COLLSIM_MAX_BUFFERS];      // bytes per channel
  char* reg[COLLSIM_MAX_REGISTERS][COLLSIM_MAX_RANKS];
  long long reg_stride[COLLSIM_MAX_REGISTERS];    // bytes per channel
  long long* ctrl[COLLSIM_MAX_RANKS];             // per rank: one launch counter (ITER) per channel
  CollsimTimeout* report;                         // mapped host memory, [COLLSIM_MAX_RANKS]
  int* claim;                                     // device memory, [COLLSIM_MAX_RANKS]
  volatile int* abort_flag;                       // mapped host memory
  // Multicast buffers (multimem ops): mc[b] is the multicast mapping of buffer b (nullptr for the others);
  // mc[b] + c * mc_stride[b] for c < mc_copies are the addresses a multimem op is issued to. One address
  // reaches every rank's copy through the switch (mc_copies = 1, multi-GPU); single-GPU mode binds every
  // rank's copy to a one-device multicast object and issues one multimem op per copy (mc_copies = nranks).
  char* mc[COLLSIM_MAX_BUFFERS];
  long long mc_stride[COLLSIM_MAX_BUFFERS];
  int mc_copies;
  int pad1;
  // ARG_ITER: the launch index as the host passed it. A launch captured into a CUDA graph keeps the value of
  // its capture in every replay (kernel arguments are frozen), unlike ITER, the device launch counter (ctrl).
  long long arg_iter;
};

struct CollsimBufferInfo {
  const char* name;
  const char* layout;
  const char* init;          // "zero" or "sentinel"
  const char* role;
  int line_bytes;
  int depth;
  int init_words;                 // 32-bit words of one line's initial contents ...
  const unsigned int* init_line;  // ... (sentinel in data words, zero in flag words)
  int multicast;                  // bound to a multicast object (reached by multimem ops)
};

struct CollsimOpInfo {
  int id;
  const char* label;
  const char* text;
};

struct CollsimProgramInfo {
  const char* protocol;
  const char* algorithm;
  const char* description;
  const char* citation;
  const char* verification;  // the verifier's verdict, or why there is none
  int unverified;            // emitted with --unverified
  const char* assumptions;   // hardware assumptions the protocol relies on
  const char* data_domain;   // restriction on user data ("" if none)
  int granule;               // per-channel message sizes are multiples of this
  int min_sm;                // lowest compute capability (x10) the kernel compiles for
  int vector_atomics;        // uses vector red/atom (sm_90)
  int has_sentinel;
  unsigned int sentinel_word;
  int n_buffers;
  const CollsimBufferInfo* buffers;
  int n_registers;
  const char* const* registers;
  int n_ops;
  const CollsimOpInfo* ops;
  int n_kernels;
  const char* emitter;
  int multicast;             // uses multimem ops: needs multicast objects (NVLink SHARP, sm_90)
  int host_barrier;          // the hosts meet before every launch: every rank's stream drains first (no graphs)
};

// dtype codes (see harness_host.h): 0 fp32, 1 bf16, 2 int32.
const CollsimProgramInfo& collsim_program_info();
long long collsim_buffer_bytes(int buffer, long long nranks, long long msg_bytes);   // one channel
long long collsim_register_bytes(int reg, long long nranks, long long msg_bytes);   // one channel
cudaError_t collsim_launch(const CollsimParams& p, int dtype, int blocks, int threads, cudaStream_t stream);
cudaError_t collsim_max_blocks_per_sm(int dtype, int threads, int* blocks);
