/**
 * The plugin every thread of a fit of several outputs loads (fit names it in `plugins`): registers the fit-outputs
 * method (fit-outputs-method.ts) where it is not yet.
 */
import { methodNames, registerMethod } from '../methods/method-registry.js';
import { FIT_OUTPUTS_METHOD } from './fit-outputs-method.js';

if (!methodNames().includes(FIT_OUTPUTS_METHOD.name)) registerMethod(FIT_OUTPUTS_METHOD);
