/* map on the CUDA backend: device helpers that several map kernels share,
 * the fault flag and 16-byte streaming loads of 4 consecutive elements. */
#ifndef LACUNA_BACKEND_CUDA_MAP_DEVICE_CUH
#define LACUNA_BACKEND_CUDA_MAP_DEVICE_CUH

#include <stdint.h>

/* Lowers the fault flag to `row` (the smallest offending row wins); the plain
 * read first spares the atomic when a smaller row is already flagged. */
__device__ __forceinline__ void flag_fault(unsigned long long *fault, unsigned long long row)
{
    if (row < *(volatile unsigned long long *)fault) atomicMin(fault, row);
}

/* Streaming loads (evict-first: each element is read once). */
__device__ __forceinline__ void load4(const float *p, float v[4])
{
    float4 a = __ldcs(reinterpret_cast<const float4 *>(p));
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
}
__device__ __forceinline__ void load4(const double *p, double v[4])
{
    double2 a = __ldcs(reinterpret_cast<const double2 *>(p));
    double2 b = __ldcs(reinterpret_cast<const double2 *>(p) + 1);
    v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
}
__device__ __forceinline__ void load4(const int32_t *p, int32_t v[4])
{
    int4 a = __ldcs(reinterpret_cast<const int4 *>(p));
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
}
__device__ __forceinline__ void load4(const int64_t *p, int64_t v[4])
{
    longlong2 a = __ldcs(reinterpret_cast<const longlong2 *>(p));
    longlong2 b = __ldcs(reinterpret_cast<const longlong2 *>(p) + 1);
    v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
}
__device__ __forceinline__ void load4(const uint16_t *p, uint16_t v[4])
{
    uint2 a = __ldcs(reinterpret_cast<const uint2 *>(p));
    v[0] = (uint16_t)(a.x & 0xFFFFu), v[1] = (uint16_t)(a.x >> 16), v[2] = (uint16_t)(a.y & 0xFFFFu),
    v[3] = (uint16_t)(a.y >> 16);
}

#endif
