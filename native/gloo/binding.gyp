{
  "targets": [{
    "target_name": "tandem_gloo",
    "sources": ["../src/gloo-addon.cc", "../src/gloo-tcp-store.cc", "../src/gloo-pipelined.cc"],
    "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
    "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS"],
    "cflags!": ["-fno-exceptions"],
    "cflags_cc!": ["-fno-exceptions", "-fno-rtti"],
    "cflags_cc": ["-std=gnu++17", "-O2", "-fexceptions"],
    "libraries": ["-lgloo", "-lpthread"]
  }]
}
