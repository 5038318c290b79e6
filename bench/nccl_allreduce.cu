/* nccl_allreduce: the all-reduce bandwidth of the visible GPUs through NCCL,
 * the ceiling for the multi-GPU exchanges (issue "Multi-GPU runs"). One
 * process, one communicator over every device (ncclCommInitAll), float32
 * sums of 8 MB to 1 GB in place; per size the median of 10 timed calls
 * (CUDA events on device 0, after 3 warm-up calls), printed as algorithm
 * bandwidth (bytes / t) and bus bandwidth (2 (D-1)/D x bytes / t, what
 * nccl-tests reports). Lacuna itself has no NCCL path yet: this measures
 * what one would get (docs/scaling.md).
 *
 *   nvcc -O2 -arch=sm_90 -o nccl_allreduce bench/nccl_allreduce.cu -lnccl
 *   NCCL_NVLS_ENABLE=0 ./nccl_allreduce
 */
#include <cuda_runtime.h>
#include <nccl.h>

#include <stdio.h>
#include <stdlib.h>

#define CHECK_CUDA(x)                                                                          \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)
#define CHECK_NCCL(x)                                                                          \
    do {                                                                                       \
        ncclResult_t r_ = (x);                                                                 \
        if (r_ != ncclSuccess) {                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r_)); \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

static int compare(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    int D = 0;
    CHECK_CUDA(cudaGetDeviceCount(&D));
    if (D < 2) {
        printf("{\"nccl_allreduce\":\"skipped\",\"devices\":%d}\n", D);
        return 0;
    }
    enum { MAXD = 16, REPS = 10 };
    if (D > MAXD) D = MAXD;
    ncclComm_t comms[MAXD];
    int ids[MAXD];
    for (int d = 0; d < D; d++) ids[d] = d;
    CHECK_NCCL(ncclCommInitAll(comms, D, ids));
    const size_t max_bytes = (size_t)1 << 30;
    float *buf[MAXD];
    cudaStream_t stream[MAXD];
    for (int d = 0; d < D; d++) {
        CHECK_CUDA(cudaSetDevice(d));
        CHECK_CUDA(cudaMalloc(&buf[d], max_bytes));
        CHECK_CUDA(cudaMemset(buf[d], 0, max_bytes));
        CHECK_CUDA(cudaStreamCreate(&stream[d]));
    }
    int version = 0;
    ncclGetVersion(&version);
    for (size_t bytes = (size_t)8 << 20; bytes <= max_bytes; bytes *= 4) {
        const size_t count = bytes / sizeof(float);
        float ms[REPS];
        for (int rep = -3; rep < REPS; rep++) {
            cudaEvent_t start, stop;
            CHECK_CUDA(cudaSetDevice(0));
            CHECK_CUDA(cudaEventCreate(&start));
            CHECK_CUDA(cudaEventCreate(&stop));
            for (int d = 0; d < D; d++) {
                CHECK_CUDA(cudaSetDevice(d));
                CHECK_CUDA(cudaStreamSynchronize(stream[d]));
            }
            CHECK_CUDA(cudaSetDevice(0));
            CHECK_CUDA(cudaEventRecord(start, stream[0]));
            CHECK_NCCL(ncclGroupStart());
            for (int d = 0; d < D; d++)
                CHECK_NCCL(ncclAllReduce(buf[d], buf[d], count, ncclFloat, ncclSum, comms[d], stream[d]));
            CHECK_NCCL(ncclGroupEnd());
            CHECK_CUDA(cudaSetDevice(0));
            CHECK_CUDA(cudaEventRecord(stop, stream[0]));
            for (int d = 0; d < D; d++) {
                CHECK_CUDA(cudaSetDevice(d));
                CHECK_CUDA(cudaStreamSynchronize(stream[d]));
            }
            float t = 0;
            CHECK_CUDA(cudaEventElapsedTime(&t, start, stop));
            if (rep >= 0) ms[rep] = t;
            CHECK_CUDA(cudaEventDestroy(start));
            CHECK_CUDA(cudaEventDestroy(stop));
        }
        qsort(ms, REPS, sizeof *ms, compare);
        const double t = 0.5 * (ms[REPS / 2 - 1] + ms[REPS / 2]) * 1e-3;
        printf("{\"nccl_allreduce\":true,\"nccl_version\":%d,\"devices\":%d,\"bytes\":%zu,\"median_ms\":%.4f,"
               "\"algbw_GBps\":%.1f,\"busbw_GBps\":%.1f}\n",
               version, D, bytes, t * 1e3, bytes / t * 1e-9, 2.0 * (D - 1) / D * bytes / t * 1e-9);
    }
    for (int d = 0; d < D; d++) {
        cudaSetDevice(d);
        cudaFree(buf[d]);
        cudaStreamDestroy(stream[d]);
        ncclCommDestroy(comms[d]);
    }
    return 0;
}
