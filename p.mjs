import * as tf from '@tensorflow/tfjs';
import { startBackend } from './dist/src/engine/backend.js';
await startBackend(tf, 'wasm');
const x = tf.randomUniform([2,6,9,2]), dy = tf.ones([2,8,9,2]);
const r = tf.engine().runKernel('Conv2DBackpropFilter', {x, dy}, {strides:1, pad:1, dataFormat:'NHWC', filterShape:[1,3,2,2]});
console.log(r.shape);
const xT = tf.randomUniform([2,6,9,2]); const f = tf.ones([8,9,2,2]);
console.log(tf.engine().runKernel('Conv2D', {x:xT, filter:f}, {strides:[1,1], pad:[[0,0],[1,1],[1,1],[0,0]], dataFormat:'NHWC', dilations:[1,1]}).shape);
