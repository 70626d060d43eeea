{
  "targets": [{
    "target_name": "tandem_native",
    "sources": ["src/addon.cc", "src/conv.cc", "src/conv-im2col.cc", "src/conv-reversed.cc", "src/matmul.cc", "src/pool.cc", "src/pool-bf16.cc", "src/eltwise.cc", "src/flat-ops.cc", "src/half-ops.cc", "src/batch-norm.cc", "src/broadcast.cc", "src/bf16-cast.cc"],
    "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
    "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS"],
    "cflags!": ["-fno-exceptions"],
    "cflags_cc!": ["-fno-exceptions", "-fno-rtti"],
    "cflags_cc": ["-std=gnu++17", "-O3", "-fexceptions", "-fopenmp", "-ffp-contract=off"],
    "libraries": ["-ldnnl", "-fopenmp"]
  }]
}
