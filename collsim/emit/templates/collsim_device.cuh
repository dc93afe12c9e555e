// collsim_device.cuh: device helpers shared by every generated kernel.
// Copied unchanged by `collsim emit`. Only rank-local memory (inputs,
// outputs, register scratch) is touched here; every access to a symmetric
// buffer is an inline-PTX instruction in kernel.cu, one per IR operation.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "program.h"

namespace collsim {

template <typename A, typename B>
struct is_same {
  static constexpr bool value = false;
};
template <typename A>
struct is_same<A, A> {
  static constexpr bool value = true;
};

// Accumulation type and conversions of each element type.
template <typename T>
struct Acc;
template <>
struct Acc<float> {
  using type = float;
  static __device__ __forceinline__ float in(float x) { return x; }
  static __device__ __forceinline__ float out(float x) { return x; }
};
template <>
struct Acc<int> {
  using type = int;
  static __device__ __forceinline__ int in(int x) { return x; }
  static __device__ __forceinline__ int out(int x) { return x; }
};
template <>
struct Acc<collsim_bf16> {
  using type = float;  // sum in fp32, round to bf16 once per Reduce op
  static __device__ __forceinline__ float in(collsim_bf16 x) { return __bfloat162float(__ushort_as_bfloat16(x.bits)); }
  static __device__ __forceinline__ collsim_bf16 out(float x) {
    collsim_bf16 r;
    r.bits = __bfloat16_as_ushort(__float2bfloat16_rn(x));
    return r;
  }
};

// VW bytes of T elements, accumulated in registers.
template <typename T, int VW>
struct Pack {
  static constexpr int N = VW / (int)sizeof(T);
  struct alignas(VW) Raw {
    T e[N];
  };
  typename Acc<T>::type v[N];

  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = 0;
  }
  __device__ __forceinline__ void add(const char* p) {
    const Raw r = *reinterpret_cast<const Raw*>(p);
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] += Acc<T>::in(r.e[i]);
  }
  __device__ __forceinline__ void store(char* p) const {
    Raw r;
#pragma unroll
    for (int i = 0; i < N; ++i) r.e[i] = Acc<T>::out(v[i]);
    *reinterpret_cast<Raw*>(p) = r;
  }
};

}  // namespace collsim

__device__ __forceinline__ unsigned int collsim_ld_u32(const char* p) {
  return *reinterpret_cast<const unsigned int*>(p);
}
__device__ __forceinline__ unsigned long long collsim_ld_u64(const char* p) {
  return *reinterpret_cast<const unsigned long long*>(p);
}
__device__ __forceinline__ void collsim_st_u32(char* p, unsigned int v) { *reinterpret_cast<unsigned int*>(p) = v; }
__device__ __forceinline__ void collsim_st_u64(char* p, unsigned long long v) {
  *reinterpret_cast<unsigned long long*>(p) = v;
}

template <int VW>
__device__ __forceinline__ void collsim_copy(char* dst, const char* src);
template <>
__device__ __forceinline__ void collsim_copy<16>(char* dst, const char* src) {
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
}
template <>
__device__ __forceinline__ void collsim_copy<8>(char* dst, const char* src) {
  *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src);
}
template <>
__device__ __forceinline__ void collsim_copy<4>(char* dst, const char* src) {
  *reinterpret_cast<unsigned int*>(dst) = *reinterpret_cast<const unsigned int*>(src);
}

// Bytes of the message channel `chan` handles.
__device__ __forceinline__ long long collsim_channel_msg(const CollsimParams& p, int chan) {
  const long long rest = p.msg_bytes - (long long)chan * p.chan_bytes;
  return rest < 0 ? 0 : (rest > p.chan_bytes ? p.chan_bytes : rest);
}

// Called on every unsuccessful poll round. Every 1024 rounds it reads
// %globaltimer and the host-visible abort flag; after p.timeout_ns it records
// where it is stuck (once per rank) and raises the abort flag so every other
// poll gives up too. Returns true when the poll must be abandoned.
// (Infrastructure, not an IR op: its memory accesses carry the collsim-infra marker.)
#define COLLSIM_TIMEOUT_ARGS(p) (p).timeout_ns, (p).report, (p).claim, (p).abort_flag
__device__ __noinline__ bool collsim_poll_slow(long long timeout_ns, CollsimTimeout* report, int* claim,
                                               volatile int* abort_flag, unsigned long long& t0, long long rank,
                                               int chan, int op, long long line, unsigned long long seen,
                                               long long want) {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  if (t0 == 0) {
    t0 = now;
    return false;
  }
  int aborted;
  asm volatile("// collsim-infra abort check\n\tld.volatile.global.u32 %0, [%1];"
               : "=r"(aborted) : "l"(abort_flag) : "memory");
  if (aborted) return true;
  if (now - t0 < (unsigned long long)timeout_ns) return false;
  if (atomicCAS(&claim[rank], 0, 1) == 0) {
    volatile CollsimTimeout* r = &report[rank];
    r->rank = (int)rank;
    r->channel = chan;
    r->op = op;
    r->line = line;
    r->seen = seen;
    r->want = want;
    r->waited_ns = now - t0;
    asm volatile("// collsim-infra report\n\tfence.sc.sys;" ::: "memory");
    r->code = 1;
  }
  asm volatile("// collsim-infra abort\n\tst.volatile.global.u32 [%0], %1;" :: "l"(abort_flag), "r"(1) : "memory");
  return true;
}

// The fast path stays in registers: only every 1024th unsuccessful round calls the slow path.
__device__ __forceinline__ bool collsim_poll_timeout(long long timeout_ns, CollsimTimeout* report, int* claim,
                                                     volatile int* abort_flag, unsigned int& spins,
                                                     unsigned long long& t0, long long rank, int chan, int op,
                                                     long long line, unsigned long long seen, long long want) {
  if ((++spins & 1023u) != 0u) return false;
  return collsim_poll_slow(timeout_ns, report, claim, abort_flag, t0, rank, chan, op, line, seen, want);
}

#ifdef COLLSIM_CHECK_BOUNDS
#include <cstdio>  // the device printf of the report below

#define COLLSIM_CHECK_REF(op, owner, nranks, slot, depth, region, regions, line0, lines, buflines)            \
  do {                                                                                                 \
    if ((owner) < 0 || (owner) >= (nranks) || (slot) < 0 || (slot) >= (depth) || (region) < 0 ||       \
        (region) >= (regions) || (line0) < 0 || (lines) < 0 || (line0) + (lines) > (buflines)) {       \
      printf("collsim: IR op #%d addresses outside its buffer (rank %lld slot %lld region %lld lines "  \
             "%lld+%lld)\n", (op), (long long)(owner), (long long)(slot), (long long)(region),             \
             (long long)(line0), (long long)(lines));                                                  \
      __trap();                                                                                        \
    }                                                                                                  \
  } while (0)
#define COLLSIM_CHECK_MULTIPLE(op, nbytes, vw)                                                        \
  do {                                                                                                 \
    if ((nbytes) % (vw)) {                                                                             \
      printf("collsim: IR op #%d moves %lld bytes, not a multiple of %d\n", (op), (long long)(nbytes),   \
             (int)(vw));                                                                               \
      __trap();                                                                                        \
    }                                                                                                  \
  } while (0)
#else
#define COLLSIM_CHECK_REF(op, owner, nranks, slot, depth, region, regions, line0, lines, buflines) ((void)0)
#define COLLSIM_CHECK_MULTIPLE(op, nbytes, vw) ((void)0)
#endif

// Single-GPU mode emulates the switch's multimem.ld_reduce: one load-reduce per copy, summed here as the
// element type adds (bf16 pairs through fp32, as .acc::f32 accumulates). Multi-GPU mode never calls it.
template <typename T>
__device__ __forceinline__ unsigned int collsim_mc_add(unsigned int a, unsigned int b);
template <>
__device__ __forceinline__ unsigned int collsim_mc_add<float>(unsigned int a, unsigned int b) {
  return __float_as_uint(__uint_as_float(a) + __uint_as_float(b));
}
template <>
__device__ __forceinline__ unsigned int collsim_mc_add<int>(unsigned int a, unsigned int b) {
  return a + b;
}
template <>
__device__ __forceinline__ unsigned int collsim_mc_add<collsim_bf16>(unsigned int a, unsigned int b) {
  const float lo = __bfloat162float(__ushort_as_bfloat16((unsigned short)(a & 0xffffu))) +
                   __bfloat162float(__ushort_as_bfloat16((unsigned short)(b & 0xffffu)));
  const float hi = __bfloat162float(__ushort_as_bfloat16((unsigned short)(a >> 16))) +
                   __bfloat162float(__ushort_as_bfloat16((unsigned short)(b >> 16)));
  return (unsigned int)__bfloat16_as_ushort(__float2bfloat16_rn(lo)) |
         ((unsigned int)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16);
}
