/** What each error code means, for `docs/reference/errors.md`: a code without a meaning does not compile. */
import type { TandemErrorCode } from '../errors.js';

export const ERROR_MEANINGS: { readonly [C in TandemErrorCode]: string } = {
  BAD_CONFIG: 'an option, a flag or a config file is refused before any thread starts; the message names the field',
  BAD_DATA: "a data module's sample is not what the run needs (a label outside the classes, a bad value)",
  UNKNOWN_MODEL: '--model is neither a builtin model nor a path to a module or a layers model.json',
  UNKNOWN_DATASET:
    '--data is no builtin dataset, image folder, .csv file or ES module: a name unknown, a path not there, a file of ' +
    'another kind',
  MODULE_NOT_FOUND: 'a path given for a model, a dataset, a plugin or a hook names no file',
  SHAPE_MISMATCH: "the model's input or output does not fit the data's samples or classes",
  BACKEND_UNAVAILABLE: 'the engine asked for cannot run here (its addon or package is missing); the message says how',
  PRECISION_UNAVAILABLE:
    'the precision asked for (bf16) cannot run here: the engine or the CPU lacks it; the message names what is missing',
  DEVICE_FAILED: 'a device thread failed during a step; the error names the device, the step and the phase',
  WORKER_EXITED: 'a thread (device, comm or loader) exited before the run ended',
  STALLED: 'the watchdog heard nothing from a device (or a peer host) for --stall-timeout-ms',
  PEER_LOST: 'another host of the job went away or its link broke',
  ABORTED: 'the run was aborted: abort(), a second signal, or a stop that outlasted --stop-grace-ms',
  TFJS_INTERNALS: 'TensorFlow.js is not the version whose internals tandem relies on',
  OUT_OF_MEMORY: 'a thread or process ran out of memory; a smaller batch or fewer devices per process uses less',
  DATA_FAILED: 'the data loader failed reading a batch',
  NON_FINITE: 'a gradient or loss became NaN or infinite (--on-nan error); the message names the first variable',
  BAD_CHECKPOINT: 'a checkpoint to resume from is unreadable or belongs to another model or config',
  BAD_MODEL: 'a model module or model.json cannot be built or trained by tandem',
  BAD_OUTPUT: 'an output place (--out, --checkpoint-dir, --trace) cannot be created or written',
  WRITE_FAILED: 'writing an output file failed during or after the run',
  RUN_LOCKED: 'another run holds the output directory',
  REPLICA_DIVERGED: 'the replica check found devices whose parameters differ (--replica-check-every)',
};
