// Data-parallel baseline for the classifier bench: the builtin mlp as an
// embedding extractor (output = 128) followed by a full, replicated classifier.
import type { ModelFactory } from '../../src/model/builtin-models.js';
import { BUILTIN_MODELS } from '../../src/model/builtin-models.js';

const EMBEDDING = 128;

const factory: ModelFactory = async (tf, options) => {
  const extractor = await BUILTIN_MODELS.mlp.factory(tf, { ...options, classes: EMBEDDING });
  const classifier = tf.layers.dense({
    units: options.classes,
    kernelInitializer: tf.initializers.glorotUniform({ seed: options.seed + 99 }),
    name: 'classifier',
  });
  return tf.sequential({ layers: [...extractor.layers, classifier] });
};
export default factory;
