/**
 * Builtin models. Each is a plain TensorFlow.js layers model built by a factory
 * from the worker's own `tf`, shaped by the data (input shape, class count) and
 * initialised from the seed, so every engine that builds it gets the same values.
 * All output logits (no softmax layer): the loss applies the softmax.
 */
import type { Tf, LayersModel } from '../engine/tfjs-types.js';

export interface ModelOptions {
  /** [height, width, channels] of one input sample. */
  inputShape: number[];
  classes: number;
  seed: number;
}

export type ModelFactory = (tf: Tf, options: ModelOptions) => LayersModel | Promise<LayersModel>;

export interface BuiltinModel {
  factory: ModelFactory;
  /**
   * Smallest height/width the architecture accepts (it takes images [height, width, channels]); absent: any sample
   * shape (it flattens).
   */
  minImageSize?: number;
  /** An input shape to use when the data does not fix one (synthetic data). */
  preferredInputShape?: number[];
  description: string;
}

/** Seeded initialisers: layer i of a model gets seed + i, so values depend on the seed only. */
function seeded(tf: Tf, seed: number) {
  let next = 0;
  return () => tf.initializers.glorotUniform({ seed: seed + 7919 * next++ });
}

/**
 * Any sample shape: a sample of 2 or more dimensions is flattened (tfjs's Flatten refuses 1-D samples, which need
 * none).
 */
const mlp: ModelFactory = (tf, { inputShape, classes, seed }) => {
  const init = seeded(tf, seed);
  const flat = inputShape.length === 1;
  return tf.sequential({
    name: 'mlp',
    layers: [
      ...(flat ? [] : [tf.layers.flatten({ inputShape })]),
      tf.layers.dense({ ...(flat ? { inputShape } : {}), units: 128, activation: 'relu', kernelInitializer: init() }),
      tf.layers.dense({ units: 64, activation: 'relu', kernelInitializer: init() }),
      tf.layers.dense({ units: classes, kernelInitializer: init(), name: 'logits' }),
    ],
  });
};

/** Three conv3x3+relu+maxpool blocks (32/64/64), then FC 512 and the classifier: ~90% of parameters in FC. */
const alexnetMini: ModelFactory = (tf, { inputShape, classes, seed }) => {
  const init = seeded(tf, seed);
  const block = (filters: number, first: boolean) => [
    tf.layers.conv2d({
      ...(first ? { inputShape } : {}),
      filters,
      kernelSize: 3,
      padding: 'same',
      activation: 'relu',
      kernelInitializer: init(),
    }),
    tf.layers.maxPooling2d({ poolSize: 2, strides: 2 }),
  ];
  return tf.sequential({
    name: 'alexnet_mini',
    layers: [
      ...block(32, true),
      ...block(64, false),
      ...block(64, false),
      tf.layers.flatten(),
      tf.layers.dense({ units: 512, activation: 'relu', kernelInitializer: init(), name: 'fc1' }),
      tf.layers.dense({ units: classes, kernelInitializer: init(), name: 'logits' }),
    ],
  });
};

/**
 * tfjs-examples' mnist-node network: two conv3x3 (32) + relu, maxpool, two conv3x3 (64) + relu, maxpool (all
 * 'valid'), dropout 0.25, FC 512 + relu, dropout 0.5, the classifier (logits: tandem's loss applies the softmax).
 */
const mnistNode: ModelFactory = (tf, { inputShape, classes, seed }) => {
  const init = seeded(tf, seed);
  const conv = (filters: number, first = false) =>
    tf.layers.conv2d({
      ...(first ? { inputShape } : {}),
      filters,
      kernelSize: 3,
      activation: 'relu',
      kernelInitializer: init(),
    });
  const pool = () => tf.layers.maxPooling2d({ poolSize: 2, strides: 2 });
  return tf.sequential({
    name: 'mnist_node',
    layers: [
      ...[conv(32, true), conv(32), pool(), conv(64), conv(64), pool(), tf.layers.flatten()],
      tf.layers.dropout({ rate: 0.25, seed }),
      tf.layers.dense({ units: 512, activation: 'relu', kernelInitializer: init() }),
      tf.layers.dropout({ rate: 0.5, seed: seed + 1 }),
      tf.layers.dense({ units: classes, kernelInitializer: init(), name: 'logits' }),
    ],
  });
};

/** The real AlexNet shapes (one tower): 227x227x3 input, ~61M parameters at 1000 classes. */
const alexnet: ModelFactory = (tf, { inputShape, classes, seed }) => {
  const init = seeded(tf, seed);
  const conv = (filters: number, kernelSize: number, strides: number, padding: 'same' | 'valid', extra = {}) =>
    tf.layers.conv2d({
      filters,
      kernelSize,
      strides,
      padding,
      activation: 'relu',
      kernelInitializer: init(),
      ...extra,
    });
  const pool = () => tf.layers.maxPooling2d({ poolSize: 3, strides: 2 });
  return tf.sequential({
    name: 'alexnet',
    layers: [
      conv(96, 11, 4, 'valid', { inputShape }),
      pool(),
      conv(256, 5, 1, 'same'),
      pool(),
      conv(384, 3, 1, 'same'),
      conv(384, 3, 1, 'same'),
      conv(256, 3, 1, 'same'),
      pool(),
      tf.layers.flatten(),
      tf.layers.dense({ units: 4096, activation: 'relu', kernelInitializer: init(), name: 'fc6' }),
      tf.layers.dense({ units: 4096, activation: 'relu', kernelInitializer: init(), name: 'fc7' }),
      tf.layers.dense({ units: classes, kernelInitializer: init(), name: 'logits' }),
    ],
  });
};

/** All-convolutional, global average pooling, no big FC layer: the opposite of AlexNet-like. */
const convnetGap: ModelFactory = (tf, { inputShape, classes, seed }) => {
  const init = seeded(tf, seed);
  return tf.sequential({
    name: 'convnet_gap',
    layers: [
      tf.layers.conv2d({
        inputShape,
        filters: 32,
        kernelSize: 3,
        padding: 'same',
        activation: 'relu',
        kernelInitializer: init(),
      }),
      tf.layers.conv2d({
        filters: 64,
        kernelSize: 3,
        strides: 2,
        padding: 'same',
        activation: 'relu',
        kernelInitializer: init(),
      }),
      tf.layers.conv2d({
        filters: 128,
        kernelSize: 3,
        strides: 2,
        padding: 'same',
        activation: 'relu',
        kernelInitializer: init(),
      }),
      tf.layers.conv2d({
        filters: classes,
        kernelSize: 1,
        padding: 'valid',
        kernelInitializer: init(),
        name: 'classifier',
      }),
      tf.layers.globalAveragePooling2d({ name: 'logits' }),
    ],
  });
};

/** ResNet-style: a conv stem and two residual blocks (conv-BN-relu-conv-BN + shortcut), global average pooling. */
const resnetMini: ModelFactory = (tf, { inputShape, classes, seed }) => {
  const init = seeded(tf, seed);
  const conv = (filters: number, strides = 1) =>
    tf.layers.conv2d({ filters, kernelSize: 3, strides, padding: 'same', useBias: false, kernelInitializer: init() });
  const bn = () => tf.layers.batchNormalization({});
  const relu = () => tf.layers.activation({ activation: 'relu' });
  type Sym = import('@tensorflow/tfjs').SymbolicTensor;
  const apply = (layer: { apply(x: Sym | Sym[]): unknown }, x: Sym | Sym[]) => layer.apply(x) as Sym;
  const block = (x: Sym, filters: number, strides: number): Sym => {
    let y = apply(relu(), apply(bn(), apply(conv(filters, strides), x)));
    y = apply(bn(), apply(conv(filters), y));
    const shortcut =
      strides === 1
        ? x
        : apply(
            bn(),
            apply(tf.layers.conv2d({ filters, kernelSize: 1, strides, useBias: false, kernelInitializer: init() }), x),
          );
    return apply(relu(), [apply(tf.layers.add(), [y, shortcut])] as never);
  };
  const input = tf.input({ shape: inputShape });
  let x = apply(relu(), apply(bn(), apply(conv(16), input)));
  x = block(x, 16, 1);
  x = block(x, 32, 2);
  const out = apply(
    tf.layers.dense({ units: classes, kernelInitializer: init(), name: 'logits' }),
    apply(tf.layers.globalAveragePooling2d({}), x),
  );
  return tf.model({ name: 'resnet_mini', inputs: input, outputs: out });
};

/**
 * MobileNet-style: a conv stem, three depthwise-separable blocks (depthwise-BN-relu, pointwise-BN-relu), global average
 * pooling.
 */
const mobilenetMini: ModelFactory = (tf, { inputShape, classes, seed }) => {
  const init = seeded(tf, seed);
  const bnRelu = () => [tf.layers.batchNormalization({}), tf.layers.activation({ activation: 'relu6' })];
  const separable = (filters: number, strides: number) => [
    tf.layers.depthwiseConv2d({
      kernelSize: 3,
      strides,
      padding: 'same',
      useBias: false,
      depthwiseInitializer: init(),
    }),
    ...bnRelu(),
    tf.layers.conv2d({ filters, kernelSize: 1, useBias: false, kernelInitializer: init() }),
    ...bnRelu(),
  ];
  return tf.sequential({
    name: 'mobilenet_mini',
    layers: [
      tf.layers.conv2d({
        inputShape,
        filters: 16,
        kernelSize: 3,
        strides: 2,
        padding: 'same',
        useBias: false,
        kernelInitializer: init(),
      }),
      ...bnRelu(),
      ...separable(32, 1),
      ...separable(64, 2),
      ...separable(64, 1),
      tf.layers.globalAveragePooling2d({}),
      tf.layers.dense({ units: classes, kernelInitializer: init(), name: 'logits' }),
    ],
  });
};

export const BUILTIN_MODELS: Readonly<Record<string, BuiltinModel>> = {
  mlp: { factory: mlp, description: 'two hidden dense layers (128, 64)' },
  'alexnet-mini': {
    factory: alexnetMini,
    minImageSize: 8,
    preferredInputShape: [32, 32, 3],
    description: 'AlexNet-like for CPUs: 3 conv blocks, FC 512',
  },
  'mnist-node': {
    factory: mnistNode,
    minImageSize: 12,
    preferredInputShape: [28, 28, 1],
    description: "tfjs-examples' mnist-node: 4 conv, 2 maxpool, dropout, FC 512",
  },
  alexnet: {
    factory: alexnet,
    minImageSize: 195,
    preferredInputShape: [227, 227, 3],
    description: 'AlexNet shapes, 227x227x3, ~61M parameters',
  },
  'convnet-gap': {
    factory: convnetGap,
    minImageSize: 4,
    preferredInputShape: [32, 32, 3],
    description: 'all-conv with global average pooling',
  },
  'resnet-mini': {
    factory: resnetMini,
    minImageSize: 4,
    preferredInputShape: [32, 32, 3],
    description: 'ResNet-style: two residual blocks with BatchNormalization',
  },
  'mobilenet-mini': {
    factory: mobilenetMini,
    minImageSize: 8,
    preferredInputShape: [32, 32, 3],
    description: 'MobileNet-style: depthwise-separable blocks with BatchNormalization',
  },
};
