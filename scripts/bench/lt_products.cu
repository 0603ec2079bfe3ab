// Times cuBLASLt's algorithms for the small GPT's weight-gradient products, out = x^T . dy in
// float32 (x [tokens, width], dy [tokens, n], bf16, row-major; the layout trainc's side stream
// runs them in), alone and beside a kernel that holds half the GPU's multiprocessors (as the
// layers' backward does beside them). For each product it prints the heuristic's ranking (for the
// whole GPU and for half of it) with each algorithm's configuration and time, the first-ranked
// algorithm with its K split forced, and the fastest configurations of every algorithm id.
//
//   nvcc -O2 -arch=sm_90 -o lt_products scripts/bench/lt_products.cu -lcublasLt && ./lt_products [tokens]
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CHECK_CUDA(x)                                                                 \
  do {                                                                                \
    cudaError_t e = (x);                                                              \
    if (e != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

namespace {

constexpr size_t kWorkspace = 32u << 20;
constexpr int kLaunches = 20;  // products per graph replay

// Holds one multiprocessor a block (all of its shared memory) until *stop is set.
__global__ void hold_sms(volatile int* started, volatile int* stop) {
  extern __shared__ char smem[];
  if (threadIdx.x == 0) {
    smem[0] = 0;
    started[blockIdx.x] = 1;
    __threadfence_system();
    while (*stop == 0) __nanosleep(1000);
  }
  __syncthreads();
}

__global__ void fill(__nv_bfloat16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    p[i] = __float2bfloat16(((h & 0xffff) / 65536.0f - 0.5f));
  }
}

struct Problem {
  const char* name;
  int width, n;  // out [width, n]
};

struct Lt {
  cublasLtHandle_t handle;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, c;
  const void *dy, *x;
  void *out, *workspace;
};

std::string config_of(const cublasLtMatmulAlgo_t& algo) {
  int32_t id = 0, splitk = 0;
  uint32_t tile = 0, scheme = 0, stages = 0, swizzle = 0, custom = 0;
  uint16_t cluster = 0;
  size_t w = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &w);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &w);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk), &w);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof(scheme), &w);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages), &w);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle, sizeof(swizzle), &w);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom, sizeof(custom), &w);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof(cluster), &w);
  char text[160];
  std::snprintf(text, sizeof(text), "algo %3d tile %3u splitk %2d scheme %u stages %3u swz %u custom %u cluster %u", id, tile, splitk,
                scheme, stages, swizzle, custom, cluster);
  return text;
}

// Microseconds a product (the median of 7 replays of a graph of kLaunches); negative if it fails.
double time_algo(const Lt& lt, const cublasLtMatmulAlgo_t& algo, cudaStream_t stream) {
  const float alpha = 1.0f, beta = 0.0f;
  if (cublasLtMatmul(lt.handle, lt.desc, &alpha, lt.dy, lt.a, lt.x, lt.b, &beta, lt.out, lt.c, lt.out, lt.c, &algo, lt.workspace, kWorkspace,
                     stream) != CUBLAS_STATUS_SUCCESS) {
    return -1;
  }
  if (cudaStreamSynchronize(stream) != cudaSuccess) return -1;
  cudaGraph_t graph;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kLaunches; ++i) {
    cublasLtMatmul(lt.handle, lt.desc, &alpha, lt.dy, lt.a, lt.x, lt.b, &beta, lt.out, lt.c, lt.out, lt.c, &algo, lt.workspace, kWorkspace, stream);
  }
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<float> times;
  for (int r = 0; r < 9; ++r) {
    cudaEventRecord(start, stream);
    cudaGraphLaunch(exec, stream);
    cudaEventRecord(stop, stream);
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (r >= 2) times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2] * 1000.0 / kLaunches;
}

// The same, with `held` multiprocessors held by hold_sms on another stream throughout.
struct Holder {
  int* started;  // mapped host memory, a flag a block
  int* stop;
  cudaStream_t stream;
  int smem;
};

double time_beside(const Lt& lt, const cublasLtMatmulAlgo_t& algo, cudaStream_t stream, Holder& h, int held) {
  if (held == 0) return time_algo(lt, algo, stream);
  for (int i = 0; i < held; ++i) h.started[i] = 0;
  *h.stop = 0;
  int *started_d, *stop_d;
  cudaHostGetDevicePointer(&started_d, h.started, 0);
  cudaHostGetDevicePointer(&stop_d, h.stop, 0);
  hold_sms<<<held, 32, h.smem, h.stream>>>(started_d, stop_d);
  for (int i = 0; i < held; ++i) {
    while (((volatile int*)h.started)[i] == 0) {
    }
  }
  const double us = time_algo(lt, algo, stream);
  *(volatile int*)h.stop = 1;
  CHECK_CUDA(cudaStreamSynchronize(h.stream));
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  const int tokens = argc > 1 ? std::atoi(argv[1]) : 2048;
  const Problem problems[] = {{"qkv weight [256 x 768]", 256, 768},
                              {"attention projection weight [256 x 256]", 256, 256},
                              {"fc weight [256 x 1024]", 256, 1024},
                              {"second projection weight [1024 x 256]", 1024, 256}};
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount, half = sms / 2;
  std::printf("%s, %d SMs, cuBLASLt %zu, tokens %d\n", prop.name, sms, cublasLtGetVersion(), tokens);
  CHECK_CUDA(cudaSetDeviceFlags(cudaDeviceMapHost));
  Holder holder;
  CHECK_CUDA(cudaHostAlloc(&holder.started, sms * sizeof(int), cudaHostAllocMapped));
  CHECK_CUDA(cudaHostAlloc(&holder.stop, sizeof(int), cudaHostAllocMapped));
  CHECK_CUDA(cudaStreamCreateWithFlags(&holder.stream, cudaStreamNonBlocking));
  holder.smem = static_cast<int>(prop.sharedMemPerBlockOptin);
  CHECK_CUDA(cudaFuncSetAttribute(hold_sms, cudaFuncAttributeMaxDynamicSharedMemorySize, holder.smem));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  Lt lt{};
  cublasLtCreate(&lt.handle);
  __nv_bfloat16 *x, *dy;
  CHECK_CUDA(cudaMalloc(&x, size_t(tokens) * 1024 * 2));
  CHECK_CUDA(cudaMalloc(&dy, size_t(tokens) * 1024 * 2));
  CHECK_CUDA(cudaMalloc(&lt.out, 1024 * 1024 * 4));
  CHECK_CUDA(cudaMalloc(&lt.workspace, kWorkspace));
  fill<<<256, 256>>>(x, size_t(tokens) * 1024, 1);
  fill<<<256, 256>>>(dy, size_t(tokens) * 1024, 2);
  lt.x = x;
  lt.dy = dy;

  for (const Problem& p : problems) {
    // out^T [n, width] column-major = dy^T . x: A = dy stored [n, tokens] (ld n), B = x stored
    // [width, tokens] (ld width) transposed.
    std::printf("\n=== %s, K = %d tokens\n", p.name, tokens);
    cublasLtMatmulDescCreate(&lt.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    const cublasOperation_t op_n = CUBLAS_OP_N, op_t = CUBLAS_OP_T;
    cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_n, sizeof(op_n));
    cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_t, sizeof(op_t));
    cublasLtMatrixLayoutCreate(&lt.a, CUDA_R_16BF, p.n, tokens, p.n);
    cublasLtMatrixLayoutCreate(&lt.b, CUDA_R_16BF, p.width, tokens, p.width);
    cublasLtMatrixLayoutCreate(&lt.c, CUDA_R_32F, p.n, p.width, p.n);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    const uint64_t ws = kWorkspace;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));

    // 1. The heuristic's ranking for the whole GPU and for half of it.
    cublasLtMatmulAlgo_t first_half{};
    for (int target : {0, half}) {
      cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &target, sizeof(target));
      cublasLtMatmulHeuristicResult_t results[16];
      int returned = 0;
      cublasLtMatmulAlgoGetHeuristic(lt.handle, lt.desc, lt.a, lt.b, lt.c, lt.c, pref, 16, results, &returned);
      std::printf("-- heuristic, SM target %d: %d algorithms (us alone / beside %d held SMs)\n", target, returned, half);
      for (int i = 0; i < returned; ++i) {
        if (target == half && i == 0) first_half = results[i].algo;
        std::printf("  #%2d %s  %7.2f %7.2f\n", i, config_of(results[i].algo).c_str(), time_algo(lt, results[i].algo, stream),
                    time_beside(lt, results[i].algo, stream, holder, half));
      }
    }
    int zero = 0;
    cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &zero, sizeof(zero));

    // 2. Half's first-ranked algorithm with its K split forced.
    std::printf("-- half's first with the K split forced (us alone / beside)\n");
    for (int splitk : {1, 2, 3, 4, 6, 8, 12, 16}) {
      for (uint32_t scheme : {CUBLASLT_REDUCTION_SCHEME_NONE, CUBLASLT_REDUCTION_SCHEME_INPLACE, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE,
                              CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE}) {
        if ((splitk == 1) != (scheme == CUBLASLT_REDUCTION_SCHEME_NONE)) continue;
        cublasLtMatmulAlgo_t algo = first_half;
        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk));
        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof(scheme));
        cublasLtMatmulHeuristicResult_t check{};
        if (cublasLtMatmulAlgoCheck(lt.handle, lt.desc, lt.a, lt.b, lt.c, lt.c, &algo, &check) != CUBLAS_STATUS_SUCCESS ||
            check.workspaceSize > kWorkspace) {
          std::printf("  splitk %2d scheme %u: not supported\n", splitk, scheme);
          continue;
        }
        std::printf("  %s  %7.2f %7.2f\n", config_of(algo).c_str(), time_algo(lt, algo, stream), time_beside(lt, algo, stream, holder, half));
      }
    }

    // 3. Every algorithm id: tiles x K splits x reductions (stages and the rest left to the library),
    // the five fastest beside the held SMs.
    int ids[256], id_count = 0;
    cublasLtMatmulAlgoGetIds(lt.handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUDA_R_32F, 256, ids, &id_count);
    struct Timed {
      double beside, alone;
      std::string config;
    };
    std::vector<Timed> timed;
    int checked = 0;
    for (int k = 0; k < id_count && timed.size() < 400; ++k) {
      cublasLtMatmulAlgo_t base;
      if (cublasLtMatmulAlgoInit(lt.handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUDA_R_32F, ids[k], &base) !=
          CUBLAS_STATUS_SUCCESS) {
        continue;
      }
      uint32_t tiles[128];
      size_t written = 0;
      cublasLtMatmulAlgoCapGetAttribute(&base, CUBLASLT_ALGO_CAP_TILE_IDS, tiles, sizeof(tiles), &written);
      int tile_count = static_cast<int>(written / sizeof(uint32_t));
      if (tile_count == 0) tiles[tile_count++] = CUBLASLT_MATMUL_TILE_UNDEFINED;
      for (int t = 0; t < tile_count; ++t) {
        for (int splitk : {1, 2, 4, 8, 16}) {
          for (uint32_t scheme : {CUBLASLT_REDUCTION_SCHEME_NONE, CUBLASLT_REDUCTION_SCHEME_INPLACE, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE}) {
            if ((splitk == 1) != (scheme == CUBLASLT_REDUCTION_SCHEME_NONE)) continue;
            cublasLtMatmulAlgo_t algo = base;
            cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tiles[t], sizeof(tiles[t]));
            cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk));
            cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof(scheme));
            cublasLtMatmulHeuristicResult_t check{};
            ++checked;
            if (cublasLtMatmulAlgoCheck(lt.handle, lt.desc, lt.a, lt.b, lt.c, lt.c, &algo, &check) != CUBLAS_STATUS_SUCCESS ||
                check.workspaceSize > kWorkspace) {
              continue;
            }
            const double beside = time_beside(lt, algo, stream, holder, half);
            if (beside > 0) timed.push_back({beside, time_algo(lt, algo, stream), config_of(algo)});
          }
        }
      }
    }
    std::sort(timed.begin(), timed.end(), [](const Timed& l, const Timed& r) { return l.beside < r.beside; });
    std::printf("-- every id: %d ids, %d configurations checked, %zu ran; the fastest beside (us alone / beside)\n", id_count, checked,
                timed.size());
    for (size_t i = 0; i < timed.size() && i < 6; ++i) std::printf("  %s  %7.2f %7.2f\n", timed[i].config.c_str(), timed[i].alone, timed[i].beside);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(lt.a);
    cublasLtMatrixLayoutDestroy(lt.b);
    cublasLtMatrixLayoutDestroy(lt.c);
    cublasLtMatmulDescDestroy(lt.desc);
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  return 0;
}
