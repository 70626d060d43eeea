import * as tf from '@tensorflow/tfjs';
import { startBackend } from './dist/src/engine/backend.js';
await startBackend(tf, process.argv[2]);
const x = tf.randomUniform([2,7,7,3],-1,1,'float32',1), w = tf.randomUniform([3,3,3,4],-1,1,'float32',2);
const y = tf.conv2d(x, w, [2,1], 1); const dy = tf.randomUniform(y.shape,-1,1,'float32',3);
const which = process.argv[3];
for (const pad of [1, [[0,0],[1,1],[1,1],[0,0]], 'same']) {
let r;
if (which === 'dx') r = tf.engine().runKernel('Conv2DBackpropInput', {dy, filter: w}, {strides:[2,1], pad, dataFormat:'NHWC', inputShape:[2,7,7,3]});
else r = tf.engine().runKernel('Conv2DBackpropFilter', {x, dy}, {strides:[2,1], pad, dataFormat:'NHWC', filterShape:[3,3,3,4]});
console.log(which, JSON.stringify(pad), r.shape, r.sum().dataSync()[0]);
}
const a = tf.randomUniform([64,64]); console.log(tf.matMul(a,a).sum().dataSync()[0]);
