/** The tfjs namespace as tandem uses it: the worker's own instance, passed around, never imported twice. */
export type Tf = typeof import('@tensorflow/tfjs');
export type Tensor = import('@tensorflow/tfjs').Tensor;
export type LayersModel = import('@tensorflow/tfjs').LayersModel;
export type Variable = import('@tensorflow/tfjs').Variable;
export type TensorInfo = import('@tensorflow/tfjs-core').TensorInfo;
export type KernelBackend = import('@tensorflow/tfjs-core').KernelBackend;
/** A layer's weight (trainable or not), as `model.weights` lists it. */
export type LayerVariable = LayersModel['weights'][number];
