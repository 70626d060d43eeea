{
  "targets": [{
    "target_name": "tandem_shm",
    "sources": ["../src/shm-addon.cc"],
    "cflags_cc": ["-std=gnu++17", "-O2", "-Wno-cast-function-type"],
    "libraries": ["-lrt"]
  }]
}
