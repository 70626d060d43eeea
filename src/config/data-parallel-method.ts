/** Whether method `name` trains as data-parallel does (data-parallel itself, or one that says so, as fit-outputs). */
import { getMethod } from '../methods/method-registry.js';

export function dataParallelMethod(name: string): boolean {
  return name === 'data-parallel' || getMethod(name).dataParallel === true;
}
