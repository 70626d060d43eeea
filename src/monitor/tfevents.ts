/**
 * TensorBoard's event-file format, as TensorFlow writes it: TFRecord framing (uint64 length, masked CRC-32C of the
 * length, the record, masked CRC-32C of the record) around `Event` protos (tensorflow/core/util/event.proto):
 * wall_time (double, 1), step (int64, 2), file_version (string, 3: the first event), summary (5) holding
 * `Summary.value` (repeated, 1) of tag (string, 1) and simple_value (float, 2), session_log (6: `SessionLog` of
 * status (enum, 1), START = 1: a run restarted at this step; TensorBoard drops what it read at this step and later).
 */
import { crc32c } from '@aws-crypto/crc32c';
import { PbfWriter } from 'pbf';

/** The version string of the first event of every file TensorFlow writes. */
export const FILE_VERSION = 'brain.Event:2';

export interface ScalarValue {
  tag: string;
  value: number;
}

/** TFRecord's CRC mask: rotate right by 15, add a constant (so a CRC of data holding CRCs stays strong). */
export function maskedCrc(data: Uint8Array): number {
  const crc = crc32c(data);
  return (((crc >>> 15) | (crc << 17)) + 0xa282ead8) >>> 0;
}

/** One TFRecord: the record framed by its length and both masked CRCs. */
export function tfRecord(data: Uint8Array): Buffer {
  const header = Buffer.alloc(12);
  header.writeBigUInt64LE(BigInt(data.length), 0);
  header.writeUInt32LE(maskedCrc(header.subarray(0, 8)), 8);
  const footer = Buffer.alloc(4);
  footer.writeUInt32LE(maskedCrc(data), 0);
  return Buffer.concat([header, data, footer]);
}

function writeValue(v: ScalarValue, pbf: PbfWriter): void {
  pbf.writeStringField(1, v.tag);
  pbf.writeFloatField(2, v.value);
}

function writeSummary(values: ScalarValue[], pbf: PbfWriter): void {
  for (const v of values) pbf.writeMessage(1, writeValue, v);
}

/** What an event holds: the file version, a session's start (`SessionLog.START`), or one step's scalars. */
export type EventBody = { fileVersion: string } | { sessionStart: true } | ScalarValue[];

const SESSION_LOG_START = 1;

/** An `Event` proto: the file-version event (no values), a session's start, or one step's scalar summary. */
export function eventProto(wallTime: number, step: number, body: EventBody): Uint8Array {
  const pbf = new PbfWriter();
  pbf.writeDoubleField(1, wallTime);
  if (step !== 0) pbf.writeVarintField(2, step);
  if (Array.isArray(body)) pbf.writeMessage(5, writeSummary, body);
  else if ('fileVersion' in body) pbf.writeStringField(3, body.fileVersion);
  else pbf.writeMessage(6, (_: unknown, p: PbfWriter) => p.writeVarintField(1, SESSION_LOG_START), undefined);
  return pbf.finish();
}

/** The framed record of an event written now (wall time in seconds, as TensorFlow's). */
export function eventRecord(step: number, body: EventBody, now = Date.now()): Buffer {
  return tfRecord(eventProto(now / 1000, step, body));
}
