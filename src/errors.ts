/**
 * The one error class of tandem. Every failure a user can see carries a code
 * (stable, for programs) and a message that names the culprit and the fix.
 */
export type TandemErrorCode =
  | 'BAD_CONFIG'
  | 'BAD_DATA'
  | 'UNKNOWN_MODEL'
  | 'UNKNOWN_DATASET'
  | 'MODULE_NOT_FOUND'
  | 'SHAPE_MISMATCH'
  | 'BACKEND_UNAVAILABLE'
  | 'PRECISION_UNAVAILABLE'
  | 'DEVICE_FAILED'
  | 'WORKER_EXITED'
  | 'STALLED'
  | 'PEER_LOST'
  | 'ABORTED'
  | 'TFJS_INTERNALS'
  | 'OUT_OF_MEMORY'
  | 'DATA_FAILED'
  | 'NON_FINITE'
  | 'BAD_CHECKPOINT'
  | 'BAD_MODEL'
  | 'BAD_OUTPUT'
  | 'WRITE_FAILED'
  | 'RUN_LOCKED'
  | 'REPLICA_DIVERGED';

/** Where a device failure happened, when it happened on a device. */
export interface DeviceFailureContext {
  device: number;
  step: number;
  phase: string;
}

/** The mark every copy of tandem's TandemError carries (Symbol.for: the same symbol in every copy and thread). */
const TANDEM_ERROR = Symbol.for('tandem.TandemError');

export class TandemError extends Error {
  readonly code: TandemErrorCode;
  readonly context?: DeviceFailureContext;

  /**
   * `instanceof TandemError` holds for a TandemError of any copy of tandem in the thread: a plugin that loads tandem
   * from its own dependency, or through another path, throws errors that tandem's code still knows by their code.
   */
  static override [Symbol.hasInstance](value: unknown): value is TandemError {
    if (this !== TandemError) return Function.prototype[Symbol.hasInstance].call(this, value);
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[TANDEM_ERROR] === true;
  }

  constructor(code: TandemErrorCode, message: string, context?: DeviceFailureContext, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TandemError';
    this.code = code;
    this.context = context;
  }
}
Object.defineProperty(TandemError.prototype, TANDEM_ERROR, { value: true });

/** An error as it crosses a thread (or process) boundary: plain data, with its code, context and causes. */
export interface SerializedError {
  name: string;
  message: string;
  stack?: string;
  code?: TandemErrorCode;
  context?: DeviceFailureContext;
  cause?: SerializedError;
}

export function serializeError(err: unknown, depth = 0): SerializedError {
  if (!(err instanceof Error)) return { name: 'Error', message: String(err) };
  const out: SerializedError = { name: err.name, message: err.message, stack: err.stack };
  if (err instanceof TandemError) {
    out.code = err.code;
    if (err.context) out.context = { ...err.context };
  }
  if (err.cause !== undefined && depth < 8) out.cause = serializeError(err.cause, depth + 1);
  return out;
}

/** The error again, on this side: a TandemError when it had a code (same code, context and causes), else an Error. */
export function deserializeError(data: SerializedError): Error {
  const cause = data.cause ? deserializeError(data.cause) : undefined;
  const err = data.code
    ? new TandemError(data.code, data.message, data.context, cause ? { cause } : undefined)
    : new Error(data.message, cause ? { cause } : undefined);
  if (!data.code) err.name = data.name;
  if (data.stack) err.stack = data.stack;
  return err;
}
