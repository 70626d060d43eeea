/**
 * Which of tandem's tfjs-shaped entry points a shared check runs for: its refusals begin with this name, so that a
 * user of `evaluate` is not told about `fit`.
 */
export type FitCaller = 'fit' | 'fitDataset' | 'evaluate';
