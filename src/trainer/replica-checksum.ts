/**
 * A replica's parameters as a short hex digest of their bits (two 32-bit
 * FNV-1a lanes over the float words): equal digests on every host mean
 * equal replicas; it is printed in the summary so hosts can be compared.
 */
export function replicaChecksum(values: Float32Array): string {
  const words = new Uint32Array(values.buffer, values.byteOffset, values.length);
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ words.length;
  for (let i = 0; i < words.length; i++) {
    a = Math.imul(a ^ words[i], 0x01000193);
    b = Math.imul(b ^ ((words[i] >>> 16) | (words[i] << 16)), 0x5bd1e995) ^ i;
  }
  return (a >>> 0).toString(16).padStart(8, '0') + (b >>> 0).toString(16).padStart(8, '0');
}
