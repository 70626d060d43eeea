/**
 * The one error class of tandem. Every failure a user can see carries a code
 * (stable, for programs) and a message that names the culprit and the fix.
 */
export type TandemErrorCode =
  | 'BAD_CONFIG'
  | 'UNKNOWN_MODEL'
  | 'UNKNOWN_DATASET'
  | 'MODULE_NOT_FOUND'
  | 'SHAPE_MISMATCH'
  | 'BACKEND_UNAVAILABLE'
  | 'DEVICE_FAILED'
  | 'WORKER_EXITED'
  | 'STALLED'
  | 'ABORTED'
  | 'TFJS_INTERNALS'
  | 'OUT_OF_MEMORY'
  | 'DATA_FAILED'
  | 'NON_FINITE'
  | 'BAD_CHECKPOINT';

/** Where a device failure happened, when it happened on a device. */
export interface DeviceFailureContext {
  device: number;
  step: number;
  phase: string;
}

export class TandemError extends Error {
  readonly code: TandemErrorCode;
  readonly context?: DeviceFailureContext;

  constructor(code: TandemErrorCode, message: string, context?: DeviceFailureContext, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TandemError';
    this.code = code;
    this.context = context;
  }
}

/** An error as it crosses a thread boundary: plain data, rethrown with context on the other side. */
export interface SerializedError {
  name: string;
  message: string;
  stack?: string;
  code?: TandemErrorCode;
}

export function serializeError(err: unknown): SerializedError {
  if (err instanceof TandemError) return { name: err.name, message: err.message, stack: err.stack, code: err.code };
  if (err instanceof Error) return { name: err.name, message: err.message, stack: err.stack };
  return { name: 'Error', message: String(err) };
}
