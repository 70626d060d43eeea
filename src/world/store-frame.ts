/**
 * A value of host 0's store that carries a kind, a JSON header and bytes (host-channel.ts: the resume checkpoint):
 * kind byte, header length (u32 LE), JSON header, body. */
export function frame(kind: number, header: object, body: Uint8Array): Buffer {
  const json = Buffer.from(JSON.stringify(header));
  const length = Buffer.alloc(4);
  length.writeUInt32LE(json.length, 0);
  return Buffer.concat([Buffer.from([kind]), length, json, body]);
}

export function unframe(value: Buffer): {
  kind: number;
  header: { source?: string; message?: string };
  body: Uint8Array;
} {
  const length = value.readUInt32LE(1);
  return {
    kind: value[0],
    header: JSON.parse(value.subarray(5, 5 + length).toString()) as { source?: string; message?: string },
    body: value.subarray(5 + length),
  };
}
