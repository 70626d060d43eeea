// tandem's pipelined, rank-ordered all-reduce over a Gloo context's pairs (unbound buffers: Gloo's point-to-point
// sends and receives), and an all-to-all and an all-gather that post their receives first.
//
// Why receives first: a Gloo send of an unbound buffer waits for the peer's "ready to receive" notice, which travels
// on the same TCP stream as the peer's data. gloo::alltoallv and gloo::allgatherv post each send before the matching
// receive, so a rank that arrives second queues all its data before its notice: the first rank's data waits for the
// second's whole transfer, and the two directions take turns (measured: half the line rate between 2 hosts,
// bench/hosts-line-rate.ts). Posting every receive before any send puts every notice ahead of all data.
#include "gloo-pipelined.h"

#include <gloo/common/error.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <cmath>
#include <memory>

namespace tandem_gloo {

namespace {

// Slots of tandem's own messages: a prefix Gloo's collectives do not use (theirs are 0x01..0x08), then a counter.
constexpr uint64_t kTandemSlotPrefix = 0x54ull << 56;
uint64_t NextSlot(uint64_t& tag) { return kTandemSlotPrefix | (tag++ & ((1ull << 56) - 1)); }

// Floats of the buffer whose shards may be on their way out ahead of the reduction (at least 2 chunks): bounds what
// sits in the socket buffers. Measured on a loaded 2-core machine, within its noise: 256K, 1M floats and no window
// gave the same times at 1 Gbit/s and 100 Mbit/s (bench/hosts-line-rate.ts).
constexpr size_t kWindowFloats = 1 << 20;

// [start, end) of shard q of [from, to) split in `size` near-equal shards: tandem's shardOf (reduce-slots.ts).
std::pair<size_t, size_t> ShardOf(size_t from, size_t to, int q, int size) {
  size_t n = to - from, base = n / size, extra = n % size;
  size_t start = from + q * base + std::min<size_t>(q, extra);
  return {start, start + base + (static_cast<size_t>(q) < extra ? 1 : 0)};
}

// a = max(a, b) as JavaScript's Math.max: NaN wins, +0 beats -0.
inline float MaxJs(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

// out[i] = op over copies[0..N-1][i] in rank order (float32 at every step), / N for a mean: reduceSlotsInto's bits.
// out may be one of the copies (each element is read before it is written).
void ReduceInOrder(const std::vector<const float*>& copies, float* out, size_t len, ReduceKind op) {
  const size_t n = copies.size();
  for (size_t i = 0; i < len; i++) {
    float acc = copies[0][i];
    for (size_t r = 1; r < n; r++) acc = op == ReduceKind::kMax ? MaxJs(acc, copies[r][i]) : acc + copies[r][i];
    out[i] = op == ReduceKind::kMean ? acc / static_cast<float>(n) : acc;
  }
}

void WaitRecvs(gloo::transport::UnboundBuffer& buf, int count, std::chrono::milliseconds timeout) {
  for (int i = 0; i < count; i++)
    if (!buf.waitRecv(nullptr, timeout)) GLOO_THROW_IO_EXCEPTION("a receive was aborted");
}

void WaitSends(gloo::transport::UnboundBuffer& buf, int count, std::chrono::milliseconds timeout) {
  for (int i = 0; i < count; i++)
    if (!buf.waitSend(nullptr, timeout)) GLOO_THROW_IO_EXCEPTION("a send was aborted");
}

}  // namespace

void PipelinedAllReduce(const std::shared_ptr<gloo::Context>& context, float* buf, size_t n, ReduceKind op, size_t chunkFloats,
                        std::vector<float>& scratch, uint64_t& tag, std::chrono::milliseconds timeout) {
  const int size = context->size, me = context->rank;
  if (size == 1 || n == 0) return;
  chunkFloats = std::max<size_t>(chunkFloats, static_cast<size_t>(size));
  const size_t chunks = (n + chunkFloats - 1) / chunkFloats;
  auto chunk = [&](size_t c) { return std::make_pair(c * chunkFloats, std::min(n, (c + 1) * chunkFloats)); };
  // scratch: chunk c's copies of this rank's shard from its peers, peer by peer (rank order without this rank)
  std::vector<size_t> at(chunks + 1, 0);
  for (size_t c = 0; c < chunks; c++) {
    auto [s, e] = ShardOf(chunk(c).first, chunk(c).second, me, size);
    at[c + 1] = at[c] + (size - 1) * (e - s);
  }
  if (scratch.size() < at[chunks]) scratch.resize(at[chunks]);
  const uint64_t scatterBase = tag, gatherBase = tag + chunks;
  tag += 2 * chunks;
  auto scatterSlot = [&](size_t c) { uint64_t t = scatterBase + c; return NextSlot(t); };
  auto gatherSlot = [&](size_t c) { uint64_t t = gatherBase + c; return NextSlot(t); };
  auto whole = context->createUnboundBuffer(buf, n * sizeof(float));
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> copies(chunks);
  std::vector<int> copiesExpected(chunks, 0);
  int gathersExpected = 0, sendsPosted = 0;
  // 1. every receive: peers' copies of this rank's shards (into scratch), then the peers' reduced shards (into buf)
  for (size_t c = 0; c < chunks; c++) {
    auto [s, e] = ShardOf(chunk(c).first, chunk(c).second, me, size);
    copies[c] = context->createUnboundBuffer(scratch.data() + at[c], std::max<size_t>(1, at[c + 1] - at[c]) * sizeof(float));
    if (e == s) continue;
    for (int q = 0, j = 0; q < size; q++) {
      if (q == me) continue;
      copies[c]->recv(q, scatterSlot(c), j++ * (e - s) * sizeof(float), (e - s) * sizeof(float));
      copiesExpected[c]++;
    }
  }
  for (size_t c = 0; c < chunks; c++) {
    for (int q = 0; q < size; q++) {
      auto [s, e] = ShardOf(chunk(c).first, chunk(c).second, q, size);
      if (q == me || e == s) continue;
      whole->recv(q, gatherSlot(c), s * sizeof(float), (e - s) * sizeof(float));
      gathersExpected++;
    }
  }
  // 2. the first `window` chunks' shards to their owners, the next rank first (each pair's stream in chunk order)
  auto scatter = [&](size_t c) {
    for (int k = 1; k < size; k++) {
      int q = (me + k) % size;
      auto [s, e] = ShardOf(chunk(c).first, chunk(c).second, q, size);
      if (e == s) continue;
      whole->send(q, scatterSlot(c), s * sizeof(float), (e - s) * sizeof(float));
      sendsPosted++;
    }
  };
  const size_t window = std::max<size_t>(2, (kWindowFloats + chunkFloats - 1) / chunkFloats);
  for (size_t c = 0; c < std::min(window, chunks); c++) scatter(c);
  // 3. chunk by chunk as the copies arrive: reduce this rank's shard in rank order, send it back to every peer
  std::vector<const float*> slots(size);
  for (size_t c = 0; c < chunks; c++) {
    if (c + window < chunks) scatter(c + window);
    WaitRecvs(*copies[c], copiesExpected[c], timeout);
    auto [s, e] = ShardOf(chunk(c).first, chunk(c).second, me, size);
    if (e == s) continue;
    for (int q = 0, j = 0; q < size; q++) slots[q] = q == me ? buf + s : scratch.data() + at[c] + (j++) * (e - s);
    ReduceInOrder(slots, buf + s, e - s, op);
    for (int k = 1; k < size; k++) {
      whole->send((me + k) % size, gatherSlot(c), s * sizeof(float), (e - s) * sizeof(float));
      sendsPosted++;
    }
  }
  // 4. the peers' reduced shards, and every send handed to the kernel (the buffers must outlive them)
  WaitRecvs(*whole, gathersExpected, timeout);
  WaitSends(*whole, sendsPosted, timeout);
}

void ExchangeV(const std::shared_ptr<gloo::Context>& context, float* input, const std::vector<int64_t>& inCounts, float* output,
               const std::vector<int64_t>& outCounts, uint64_t& tag, std::chrono::milliseconds timeout) {
  const int size = context->size, me = context->rank;
  std::vector<size_t> inAt(size + 1, 0), outAt(size + 1, 0);
  for (int q = 0; q < size; q++) { inAt[q + 1] = inAt[q] + inCounts[q]; outAt[q + 1] = outAt[q] + outCounts[q]; }
  const uint64_t slot = NextSlot(tag);
  auto in = context->createUnboundBuffer(input, std::max<size_t>(1, inAt[size]) * sizeof(float));
  auto out = context->createUnboundBuffer(output, std::max<size_t>(1, outAt[size]) * sizeof(float));
  int recvs = 0, sends = 0;
  for (int q = 0; q < size; q++) {
    if (q == me || outCounts[q] == 0) continue;
    out->recv(q, slot, outAt[q] * sizeof(float), outCounts[q] * sizeof(float));
    recvs++;
  }
  for (int k = 1; k < size; k++) {
    int q = (me + k) % size;
    if (inCounts[q] == 0) continue;
    in->send(q, slot, inAt[q] * sizeof(float), inCounts[q] * sizeof(float));
    sends++;
  }
  if (inCounts[me] != outCounts[me]) GLOO_THROW_INVALID_OPERATION_EXCEPTION("exchangeV: this rank's own counts differ");
  std::copy(input + inAt[me], input + inAt[me + 1], output + outAt[me]);
  WaitRecvs(*out, recvs, timeout);
  WaitSends(*in, sends, timeout);
}

void AllGatherV(const std::shared_ptr<gloo::Context>& context, const float* mine, float* all, const std::vector<size_t>& counts,
                uint64_t& tag, std::chrono::milliseconds timeout) {
  const int size = context->size, me = context->rank;
  std::vector<size_t> at(size + 1, 0);
  for (int q = 0; q < size; q++) at[q + 1] = at[q] + counts[q];
  const uint64_t slot = NextSlot(tag);
  auto out = context->createUnboundBuffer(all, std::max<size_t>(1, at[size]) * sizeof(float));
  // Gloo's send reads the buffer and never writes it
  auto in = context->createUnboundBuffer(const_cast<float*>(mine), std::max<size_t>(1, counts[me]) * sizeof(float));
  int recvs = 0, sends = 0;
  for (int q = 0; q < size; q++) {
    if (q == me || counts[q] == 0) continue;
    out->recv(q, slot, at[q] * sizeof(float), counts[q] * sizeof(float));
    recvs++;
  }
  for (int k = 1; k < size && counts[me] > 0; k++) {
    in->send((me + k) % size, slot, 0, counts[me] * sizeof(float));
    sends++;
  }
  std::copy(mine, mine + counts[me], all + at[me]);
  WaitRecvs(*out, recvs, timeout);
  WaitSends(*in, sends, timeout);
}

}  // namespace tandem_gloo
