// tandem's pipelined, rank-ordered all-reduce on a Gloo context (see gloo-pipelined.cc).
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tandem_gloo {

enum class ReduceKind { kSum, kMean, kMax };

// buf[0, n) = op over every rank's buf, element by element in rank order 0..N-1 (float32 at every step, then / N for a
// mean; max as JavaScript's Math.max): the bits of tandem's reduceSlotsInto on every rank. Cut in chunks of
// `chunkFloats`; each chunk's shard q (shardOf) is reduced by rank q. Every receive is posted before any send (so no
// "ready to receive" notice waits behind this rank's own data on a TCP stream), then the first chunks' shards go out
// (a window of kWindowFloats); as chunk c's copies arrive, this rank sends chunk c + window's shards, reduces its shard
// of chunk c and sends it back while later chunks still stream in.
// `scratch` grows to (N-1)/N of n floats (plus rounding). `tag` numbers the messages (the same on every rank).
void PipelinedAllReduce(const std::shared_ptr<gloo::Context>& context, float* buf, size_t n, ReduceKind op, size_t chunkFloats,
                        std::vector<float>& scratch, uint64_t& tag, std::chrono::milliseconds timeout);

// The all-to-all of gloo::alltoallv (rank r's input[in offset q, inCounts[q]) to rank q, output in rank order) with
// every receive posted before the sends.
// all[counts[0] + … + counts[q-1], + counts[q]) = rank q's `mine`, every receive posted before any send (see the .cc).
void AllGatherV(const std::shared_ptr<gloo::Context>& context, const float* mine, float* all, const std::vector<size_t>& counts,
                uint64_t& tag, std::chrono::milliseconds timeout);

void ExchangeV(const std::shared_ptr<gloo::Context>& context, float* input, const std::vector<int64_t>& inCounts, float* output,
               const std::vector<int64_t>& outCounts, uint64_t& tag, std::chrono::milliseconds timeout);

}  // namespace tandem_gloo
