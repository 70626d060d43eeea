/**
 * The method section of a train config: the method, and the options of the classifier methods (local-head,
 * partial-fc), which those methods declare (`TrainingMethod.options`) and check in context (`resolveOptions`).
 */
import type { OptionTable } from '../options/declaration.js';
import { HEAD_KINDS, type HeadKind } from '../classifier/classifier-head.js';

/** The built-in training methods (more can be registered: see methods/method-registry.ts). */
export const METHODS = ['data-parallel', 'local-head', 'partial-fc'] as const;
export type Method = (typeof METHODS)[number] | (string & {});

export interface MethodSection {
  /** `data-parallel` (default), `local-head` (method B: each device owns a share of the labels), `partial-fc`. */
  method?: Method;
}

export const METHOD_SECTION: OptionTable<MethodSection> = {
  method: {
    kind: 'string',
    group: 'method',
    hosts: 'same',
    choices: METHODS,
    default: 'data-parallel',
    doc: 'local-head: each device owns a share of the labels; partial-fc: the Partial FC comparison',
  },
};

/** Options only the classifier methods take. */
export interface ClassifierOptions {
  /** Method B / partial-fc: embedding size the model outputs (its factory gets classes = embedding). Default 128. */
  embedding?: number;
  head?: HeadKind;
  /** cosine head: scale s (default 30) and additive angular margin in radians (default 0). */
  scale?: number;
  margin?: number;
  sampleRate?: number;
  /** A user label partition: one list of labels per device. Default: contiguous shares. */
  partition?: number[][];
  exportDevice?: number;
  exportClassifier?: boolean;
}

const method = 'method' as const;
export const CLASSIFIER_OPTIONS: OptionTable<ClassifierOptions> = {
  embedding: {
    kind: 'integer',
    group: method,
    hosts: 'same',
    arg: 'E',
    default: '128',
    doc: 'embedding size the model outputs',
  },
  head: {
    kind: 'string',
    group: method,
    hosts: 'same',
    choices: HEAD_KINDS,
    default: 'linear',
    doc: 'the classifier head',
  },
  scale: {
    kind: 'real',
    group: method,
    hosts: 'same',
    arg: 'S',
    default: '30 (cosine)',
    doc: 'cosine head: the scale s',
  },
  margin: {
    kind: 'real',
    group: method,
    hosts: 'same',
    arg: 'M',
    default: '0',
    doc: 'cosine head: additive angular margin (rad)',
  },
  sampleRate: {
    kind: 'real',
    group: method,
    hosts: 'same',
    arg: 'R',
    default: '1',
    doc: "partial-fc: share of each device's class centres in a step's softmax",
  },
  partition: {
    kind: 'config',
    type: 'list of label lists',
    group: method,
    hosts: 'same',
    default: 'contiguous shares',
    doc: 'one list of labels per device',
  },
  exportDevice: {
    kind: 'integer',
    group: method,
    hosts: 'same',
    arg: 'D',
    default: '0',
    doc: 'the device whose model is exported',
  },
  exportClassifier: {
    kind: 'boolean',
    group: method,
    hosts: 'same',
    doc: 'also write the full classifier into --out (as DIR/classifier; needs --out)',
  },
};
