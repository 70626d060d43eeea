import { Worker, isMainThread, workerData, parentPort } from 'node:worker_threads';
const STEPS = 30;
if (isMainThread) {
  const run = (n, variant) => Promise.all(Array.from({ length: n }, (_, i) => new Promise((res, rej) => {
    const w = new Worker(new URL(import.meta.url), { workerData: { variant } });
    w.once('message', m => { res(m); w.terminate(); }); w.once('error', rej);
  })));
  for (const variant of ['relu', 'fused', 'conv-only', 'relu', 'fused']) {
    const one = (await run(1, variant))[0], two = await run(2, variant);
    console.log(variant, 'alone', one.ms.toFixed(2), 'two at once', two.map(x => x.ms.toFixed(2)).join(' '), 'loss', one.loss);
  }
} else {
  const tf = await import('@tensorflow/tfjs');
  const { startBackend } = await import('./dist/src/engine/backend.js');
  await startBackend(tf, 'native', { nativeThreads: 1 });
  const v = workerData.variant;
  const fusedKernel = tf.getKernel('FusedConv2D', 'native');
  tf.registerKernel({ kernelName: 'TandemConv2D', backendName: 'native', kernelFunc: fusedKernel.kernelFunc });
  tf.registerGradient({ kernelName: 'TandemConv2D', inputsToSave: ['x', 'filter'], outputsToSave: [true], gradFunc: (dy, saved, attrs) => {
    const [x, filter, y] = saved;
    const dyAct = attrs.activation === 'relu' ? tf.engine().runKernel('TandemReluGrad', { dy, x: y }) : dy;
    return {
      x: () => tf.engine().runKernel('Conv2DBackpropInput', { dy: dyAct, filter }, { strides: attrs.strides, pad: attrs.pad, dataFormat: 'NHWC', dimRoundingMode: attrs.dimRoundingMode, inputShape: x.shape }),
      filter: () => tf.engine().runKernel('Conv2DBackpropFilter', { x, dy: dyAct }, { strides: attrs.strides, pad: attrs.pad, dataFormat: 'NHWC', dimRoundingMode: attrs.dimRoundingMode, filterShape: filter.shape }),
      bias: () => tf.sum(dyAct, [0, 1, 2]),
    };
  } });
  const m = tf.sequential();
  [32, 64, 64].forEach((f, i) => {
    m.add(tf.layers.conv2d({ ...(i === 0 ? { inputShape: [32, 32, 3] } : {}), filters: f, kernelSize: 3, padding: 'same', activation: v === 'conv-only' ? 'linear' : 'relu', useBias: v !== 'conv-only', kernelInitializer: tf.initializers.glorotUniform({ seed: i + 1 }) }));
    m.add(tf.layers.maxPooling2d({ poolSize: 2 }));
  });
  m.add(tf.layers.flatten()); m.add(tf.layers.dense({ units: 512, activation: 'relu', kernelInitializer: tf.initializers.glorotUniform({ seed: 9 }) })); m.add(tf.layers.dense({ units: 10, kernelInitializer: tf.initializers.glorotUniform({ seed: 10 }) }));
  if (v === 'fused') {
    for (const layer of m.layers) {
      if (layer.getClassName() !== 'Conv2D') continue;
      layer.call = (inputs) => tf.tidy(() => {
        const x = Array.isArray(inputs) ? inputs[0] : inputs;
        return tf.engine().runKernel('TandemConv2D', { x, filter: layer.kernel.read(), bias: layer.bias.read() },
          { strides: layer.strides, pad: layer.padding, dataFormat: 'NHWC', dilations: layer.dilationRate, activation: 'relu' });
      });
    }
  }
  const x = tf.randomUniform([32, 32, 32, 3], 0, 1, 'float32', 3); const y = tf.oneHot(tf.tensor1d(Array.from({ length: 32 }, (_, i) => i % 10), 'int32'), 10);
  let wall = 0, loss;
  for (let s = 0; s < STEPS + 5; s++) {
    const t0 = performance.now();
    const { value, grads } = tf.variableGrads(() => tf.losses.softmaxCrossEntropy(y, m.apply(x, { training: true })));
    if (s === 0) loss = [value.dataSync()[0], ...Object.values(grads).map(g => g.sum().dataSync()[0])].map(n => n.toPrecision(6)).join(',');
    value.dataSync(); value.dispose(); tf.dispose(grads);
    if (s >= 5) wall += performance.now() - t0;
  }
  parentPort.postMessage({ ms: wall / STEPS, loss });
}
